//! The `images` option of the sub-call built-ins (`llm_query(p, {images = {context[3]}})`):
//! which images go to the model with a prompt, read the same way by every built-in that
//! takes it.
//!
//! An image is a document of the context's corpus of kind `"image"` (its bytes stay
//! outside Lua: the environment keeps the corpus's images by name, [`ContextImages`]), or
//! a table `{mime = "image/png", data = <bytes>}` the code made. Anything else, an
//! unknown name, a type a vision model does not read, an empty image, or more than the
//! caps ([`MAX_IMAGES_PER_CALL`], [`MAX_IMAGE_BYTES`](crate::llm::MAX_IMAGE_BYTES)) is an
//! error naming the built-in and the entry.

use std::cell::RefCell;
use std::collections::HashMap;

use mlua::{Lua, Table, Value};

use super::options::lua_type;
use super::state::BuiltinState;
use crate::conventions::builtins::BuiltinId;
use crate::engines::meter::WorkMeter;
use crate::llm::{ImagePart, MAX_IMAGES_PER_CALL};

/// The images of the context's corpus, by document name; one that cannot be sent (too
/// large, a type no vision model reads) is kept with the reason, given when it is asked
/// for.
#[derive(Default)]
pub(crate) struct ContextImages {
    by_name: RefCell<HashMap<String, Result<ImagePart, String>>>,
}

impl ContextImages {
    /// Adds `images` (name, MIME type, bytes); a later one of the same name replaces an
    /// earlier one, as a later `--context` document would.
    pub fn add(&self, images: impl IntoIterator<Item = (String, String, std::sync::Arc<[u8]>)>) {
        let mut by_name = self.by_name.borrow_mut();
        for (name, mime, data) in images {
            let image = ImagePart::new(Some(name.clone()), &mime, data);
            by_name.insert(name, image);
        }
    }

    fn get(&self, name: &str) -> Option<Result<ImagePart, String>> {
        self.by_name.borrow().get(name).cloned()
    }
}

/// `opts.images`: the images to send, in order; none when absent.
pub(super) fn images_option(
    lua: &Lua,
    state: &BuiltinState,
    builtin: BuiltinId,
    options: &Table,
) -> mlua::Result<Vec<ImagePart>> {
    let fail = |why: String| mlua::Error::RuntimeError(format!("{}: {why}", builtin.name()));
    let list = match options.raw_get::<Value>("images")? {
        Value::Nil => return Ok(Vec::new()),
        Value::Table(list) => list,
        other => {
            return Err(fail(format!(
                "opts.images must be a list of images, got {}",
                lua_type(&other)
            )));
        }
    };
    if is_one_image(&list)? {
        return Err(fail(
            "opts.images is one image, not a list of them: write {images = {image}}".to_string(),
        ));
    }
    let count = list.raw_len();
    if count > MAX_IMAGES_PER_CALL {
        return Err(fail(format!(
            "opts.images holds {count} images; a call sends at most {MAX_IMAGES_PER_CALL}"
        )));
    }
    let mut images = Vec::with_capacity(count);
    for i in 1..=count {
        let entry = list.raw_get::<Value>(i)?;
        let image =
            image_of(lua, state, &entry)?.map_err(|why| fail(format!("opts.images[{i}] {why}")))?;
        images.push(image);
    }
    Ok(images)
}

/// Whether `list` is an image itself rather than a list of them (a slip worth a word).
fn is_one_image(list: &Table) -> mlua::Result<bool> {
    Ok(!list.raw_get::<Value>("kind")?.is_nil() || !list.raw_get::<Value>("data")?.is_nil())
}

/// The image an entry of `opts.images` stands for, or why it stands for none. The outer
/// error is a limit (the memory an inline image's copy would take).
fn image_of(
    lua: &Lua,
    state: &BuiltinState,
    entry: &Value,
) -> mlua::Result<Result<ImagePart, String>> {
    let Value::Table(table) = entry else {
        return Ok(Err(format!(
            "{}, got {}",
            WHAT_AN_IMAGE_IS,
            lua_type(entry)
        )));
    };
    match table.raw_get::<Value>("data")? {
        Value::Nil => Ok(document_image(state, table)?),
        Value::String(data) => {
            let mime = match table.raw_get::<Value>("mime")? {
                Value::String(mime) => mime.to_string_lossy(),
                other => {
                    return Ok(Err(format!(
                        "has data but no mime (e.g. mime = \"image/png\"), got {}",
                        lua_type(&other)
                    )));
                }
            };
            // The bytes are copied out of Lua to be sent: the copy counts against the
            // memory limit before it is made.
            let bytes = data.as_bytes();
            WorkMeter::new(lua, &state.tripwire).check_holding(bytes.len())?;
            Ok(ImagePart::new(None, &mime, bytes.to_vec()))
        }
        other => Ok(Err(format!(
            "has data that is not a string of the image's bytes, got {}",
            lua_type(&other)
        ))),
    }
}

/// An image document of the context (`context[i]`), by its name.
fn document_image(state: &BuiltinState, table: &Table) -> mlua::Result<Result<ImagePart, String>> {
    let (Value::String(kind), Value::String(name)) = (
        table.raw_get::<Value>("kind")?,
        table.raw_get::<Value>("name")?,
    ) else {
        return Ok(Err(format!(
            "{WHAT_AN_IMAGE_IS}, got a table that is neither"
        )));
    };
    let (kind, name) = (kind.to_string_lossy(), name.to_string_lossy());
    if kind != "image" {
        return Ok(Err(format!(
            "is the {kind} document {name:?}, not an image"
        )));
    }
    Ok(match state.images.get(&name) {
        Some(image) => image.map_err(|why| format!("({name:?}): {why}")),
        None => Err(format!("names no image of the context ({name:?})")),
    })
}

const WHAT_AN_IMAGE_IS: &str = "must be an image document of the context (context[i]) or {mime = \"image/png\", data = <bytes>}";
