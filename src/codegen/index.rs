//! The search index as generated Rust: flat statics that `Index::__from_static` borrows,
//! so a baked registry searches without building anything at run time.

use proc_macro2::{Literal, TokenStream};
use quote::{ToTokens, quote};

use crate::search::index::{Index, StrTable};

/// The `Index::__from_static(...)` expression; its arrays go into `arrays` as statics
/// named `INDEX_*`.
pub(crate) fn index_tokens(index: &Index, arrays: &mut Vec<TokenStream>) -> TokenStream {
    let mut array = |name: &str, ty: TokenStream, elements: Vec<TokenStream>| {
        let ident = quote::format_ident!("INDEX_{name}");
        let len = elements.len();
        arrays.push(quote! { pub(super) static #ident: [#ty; #len] = [#(#elements),*]; });
        quote!(&#ident)
    };
    let mut table = |name: &str, table: &StrTable| {
        let (slots, keys, ends, values) = table.parts();
        let slots = array(&format!("{name}_SLOTS"), quote!(u32), numbers(slots));
        let ends = array(&format!("{name}_ENDS"), quote!(u32), numbers(ends));
        let values = array(&format!("{name}_VALUES"), quote!(u32), numbers(values));
        (slots, keys.to_string(), ends, values)
    };
    let tables: Vec<TokenStream> = [
        ("TERMS", &index.terms),
        ("WORDS", &index.words),
        ("NAMES", &index.names),
    ]
    .into_iter()
    .map(|(name, t)| {
        let (slots, keys, ends, values) = table(name, t);
        quote!(::rlm_registry::search::StrTable::__from_static(#slots, #keys, #ends, #values))
    })
    .collect();
    let f32_ty = quote!(f32);
    let text_ty = quote!(::std::borrow::Cow<'static, str>);
    let idf = array("IDF", f32_ty.clone(), floats(&index.idf));
    let starts = array("STARTS", quote!(u32), numbers(&index.starts));
    let docs = array("DOCS", quote!(u32), numbers(&index.docs));
    let scores = array("SCORES", f32_ty.clone(), floats(&index.scores));
    let field_scores = array(
        "FIELD_SCORES",
        quote!([f32; 4]),
        index
            .field_scores
            .iter()
            .map(|shares| {
                let shares = floats(shares);
                quote!([#(#shares),*])
            })
            .collect(),
    );
    let capabilities = array("CAPABILITIES", text_ty.clone(), texts(&index.capabilities));
    let signatures = array("SIGNATURES", text_ty.clone(), texts(&index.signatures));
    let summaries = array("SUMMARIES", text_ty, texts(&index.summaries));
    let max_idf = float(index.max_idf);
    let [terms, words, names] = [&tables[0], &tables[1], &tables[2]];
    quote! {
        ::rlm_registry::search::Index::__from_static(
            #terms, #words, #names, #idf, #max_idf, #starts, #docs, #scores, #field_scores,
            #capabilities, #signatures, #summaries
        )
    }
}

fn numbers(values: &[u32]) -> Vec<TokenStream> {
    values
        .iter()
        .map(|&v| Literal::u32_unsuffixed(v).into_token_stream())
        .collect()
}

fn floats(values: &[f32]) -> Vec<TokenStream> {
    values.iter().map(|&v| float(v)).collect()
}

/// An `f32` literal that reads back as exactly `value` (scores are always finite; a
/// non-finite one, which no literal can spell, becomes 0).
fn float(value: f32) -> TokenStream {
    let value = if value.is_finite() { value } else { 0.0 };
    Literal::f32_suffixed(value).into_token_stream()
}

fn texts(values: &[crate::conventions::Text]) -> Vec<TokenStream> {
    values
        .iter()
        .map(|t| {
            let t: &str = t;
            quote!(::std::borrow::Cow::Borrowed(#t))
        })
        .collect()
}
