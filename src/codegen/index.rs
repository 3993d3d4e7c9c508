//! The search index as generated Rust: flat statics that `Index::__from_static` borrows,
//! so a baked registry searches without building anything at run time.

use proc_macro2::{Literal, TokenStream};
use quote::{ToTokens, quote};

use super::{static_array, texts};
use crate::registry::index::{Index, StrTable};

/// The `Index::__from_static(...)` expression; its arrays go into `arrays` as statics
/// named `INDEX_*`.
pub(crate) fn index_tokens(index: &Index, arrays: &mut Vec<TokenStream>) -> TokenStream {
    let text_ty = quote!(::std::borrow::Cow<'static, str>);
    let terms = table_tokens("TERMS", &index.terms, arrays);
    let words = table_tokens("WORDS", &index.words, arrays);
    let names = table_tokens("NAMES", &index.names, arrays);
    let idf = static_array(arrays, "INDEX_IDF", quote!(f32), floats(&index.idf));
    let starts = static_array(arrays, "INDEX_STARTS", quote!(u32), numbers(&index.starts));
    let docs = static_array(arrays, "INDEX_DOCS", quote!(u32), numbers(&index.docs));
    let scores = static_array(arrays, "INDEX_SCORES", quote!(f32), floats(&index.scores));
    let shares = index.field_scores.iter().map(|shares| {
        let shares = floats(shares);
        quote!([#(#shares),*])
    });
    let field_scores = static_array(
        arrays,
        "INDEX_FIELD_SCORES",
        quote!([f32; 4]),
        shares.collect(),
    );
    let capabilities = static_array(
        arrays,
        "INDEX_CAPABILITIES",
        text_ty.clone(),
        texts(&index.capabilities),
    );
    let signatures = static_array(
        arrays,
        "INDEX_SIGNATURES",
        text_ty.clone(),
        texts(&index.signatures),
    );
    let summaries = static_array(arrays, "INDEX_SUMMARIES", text_ty, texts(&index.summaries));
    let max_idf = float(index.max_idf);
    quote! {
        ::rlm_registry::registry::index::Index::__from_static(
            #terms, #words, #names, #idf, #max_idf, #starts, #docs, #scores, #field_scores,
            #capabilities, #signatures, #summaries
        )
    }
}

/// `StrTable::__from_static(...)`, its arrays named `INDEX_{name}_*`.
fn table_tokens(name: &str, table: &StrTable, arrays: &mut Vec<TokenStream>) -> TokenStream {
    let (slots, keys, ends, values) = table.parts();
    let mut array = |part: &str, values: &[u32]| {
        let ident = format!("INDEX_{name}_{part}");
        static_array(arrays, &ident, quote!(u32), numbers(values))
    };
    let (slots, ends, values) = (
        array("SLOTS", slots),
        array("ENDS", ends),
        array("VALUES", values),
    );
    quote!(::rlm_registry::registry::index::StrTable::__from_static(#slots, #keys, #ends, #values))
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
