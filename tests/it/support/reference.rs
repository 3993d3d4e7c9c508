//! The reference for differential tests: stock Lua 5.4 (the vendored C Lua, through an
//! unsandboxed `mlua::Lua::new()`) with a `print` that captures the bytes printed.

use std::cell::RefCell;
use std::rc::Rc;

use mlua::{Lua, MultiValue};

/// Output bytes, or the error message and the output bytes before it.
pub type Outcome = Result<Vec<u8>, (String, Vec<u8>)>;

/// Stock Lua 5.4 with a `print` that captures bytes.
pub struct Reference {
    lua: Lua,
    output: Rc<RefCell<Vec<u8>>>,
}

impl Reference {
    /// A fresh state with the capturing `print`.
    pub fn new() -> Reference {
        let lua = Lua::new();
        let output = Rc::new(RefCell::new(Vec::new()));
        let sink = Rc::clone(&output);
        let tostring: mlua::Function = lua.globals().get("tostring").unwrap();
        let print = lua
            .create_function(move |_, args: MultiValue| {
                let mut sink = sink.borrow_mut();
                for (i, value) in args.into_iter().enumerate() {
                    if i > 0 {
                        sink.push(b'\t');
                    }
                    let text: mlua::LuaString = tostring.call(value)?;
                    sink.extend_from_slice(&text.as_bytes());
                }
                sink.push(b'\n');
                Ok(())
            })
            .unwrap();
        lua.globals().set("print", print).unwrap();
        Reference { lua, output }
    }

    /// Runs `code` as the chunk `input`.
    pub fn run(&self, code: &[u8]) -> Outcome {
        let result = self.lua.load(code).set_name("=input").exec();
        let output = std::mem::take(&mut *self.output.borrow_mut());
        match result {
            Ok(()) => Ok(output),
            Err(error) => Err((message(&error), output)),
        }
    }
}

/// A Lua error's message without mlua's wrapping and traceback.
pub fn message(error: &mlua::Error) -> String {
    let text = match error {
        mlua::Error::CallbackError { cause, .. } => return message(cause),
        mlua::Error::RuntimeError(text) | mlua::Error::SyntaxError { message: text, .. } => {
            text.clone()
        }
        other => other.to_string(),
    };
    match text.find("\nstack traceback:") {
        Some(end) => text[..end].to_string(),
        None => text,
    }
}
