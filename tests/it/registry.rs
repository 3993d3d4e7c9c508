//! The registry API: baked vs runtime equality, precedence across directories,
//! and the records the environment needs for load-order semantics.

use mlua::{Function as LuaFunction, Lua, Table, Value};
use rlm_registry::Registry;

const LAYERS: [&str; 2] = [
    "tests/fixtures/layers/base",
    "tests/fixtures/layers/override",
];

/// The directories `build.rs` bakes with the default features, in the same order.
fn library_dirs() -> Vec<&'static str> {
    let mut dirs = Vec::new();
    if cfg!(feature = "text") {
        dirs.push("lua/text");
    }
    if cfg!(feature = "chunking") {
        dirs.push("lua/chunking");
    }
    if cfg!(feature = "recursive") {
        dirs.push("lua/recursive");
    }
    if cfg!(feature = "collections") {
        dirs.push("lua/collections");
    }
    if cfg!(feature = "statistics") {
        dirs.push("lua/statistics");
    }
    if cfg!(feature = "strings") {
        dirs.push("lua/strings");
    }
    if cfg!(feature = "time") {
        dirs.push("lua/time");
    }
    dirs
}

#[test]
fn baked_has_exactly_what_from_paths_loads_from_the_same_directories() {
    let loaded = Registry::from_paths(library_dirs()).unwrap();
    let baked = Registry::baked();
    // Empty exactly when no library feature is on.
    assert_eq!(baked.is_empty(), library_dirs().is_empty());
    assert_eq!(baked.functions(), loaded.functions());
    assert_eq!(baked.chunks(), loaded.chunks());
    assert_eq!(baked.overrides(), loaded.overrides());
    assert_eq!(baked, &loaded);
}

#[test]
fn baked_prompt_is_byte_identical_to_the_runtime_prompt() {
    let loaded = Registry::from_paths(library_dirs()).unwrap();
    assert_eq!(
        Registry::baked().system_prompt().as_bytes(),
        loaded.system_prompt().as_bytes()
    );
}

#[test]
fn system_prompt_declares_every_function_with_its_doc() {
    let registry = Registry::baked();
    let prompt = registry.system_prompt();
    for (name, function) in registry.iter_functions() {
        assert!(prompt.contains(function.doc()), "doc of {name} missing");
        let params: Vec<_> = function.params().iter().map(|p| p.name()).collect();
        assert!(prompt.contains(&format!("function {name}({}) end", params.join(", "))));
    }
}

#[test]
fn iteration_order_is_sorted_and_deterministic() {
    let a = Registry::from_paths(library_dirs()).unwrap();
    let b = Registry::from_paths(library_dirs()).unwrap();
    let names: Vec<_> = a.iter_functions().map(|(n, _)| n).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    assert_eq!(a.system_prompt(), b.system_prompt());
}

#[test]
fn later_directory_wins_and_the_override_is_recorded() {
    let registry = Registry::from_paths(LAYERS).unwrap();
    let greet = registry.get("greet").unwrap();
    assert_eq!(greet.file(), "tests/fixtures/layers/override/greeting.lua");
    assert_eq!(greet.dir(), "tests/fixtures/layers/override");
    assert_eq!(
        registry.get("farewell").unwrap().dir(),
        "tests/fixtures/layers/base"
    );

    assert_eq!(registry.overrides().len(), 1);
    let over = &registry.overrides()[0];
    assert_eq!(over.name(), "greet");
    assert_eq!(
        over.winner(),
        ("tests/fixtures/layers/override/greeting.lua", 4)
    );
    assert_eq!(
        over.overridden(),
        ("tests/fixtures/layers/base/greeting.lua", 11)
    );

    let notes = registry.notes();
    assert_eq!(notes.len(), 1);
    assert_eq!(notes[0].code.as_str(), "N001");
    assert_eq!(notes[0].severity.as_str(), "note");
    assert_eq!((notes[0].line, notes[0].column), (4, 1));
}

#[test]
fn reversed_order_reverses_the_winner() {
    let registry = Registry::from_paths([LAYERS[1], LAYERS[0]]).unwrap();
    assert_eq!(registry.get("greet").unwrap().dir(), LAYERS[0]);
}

#[test]
fn with_paths_layers_on_top_of_another_registry() {
    let base = Registry::from_paths([LAYERS[0]]).unwrap();
    let layered = base.with_paths([LAYERS[1]]).unwrap();
    assert_eq!(layered, Registry::from_paths(LAYERS).unwrap());
}

#[test]
fn from_map_gives_the_same_functions_as_files() {
    let source =
        "--- Doubles.\n---@param x number\n---@return number\nfunction double(x) return 2 * x end";
    let registry = Registry::from_map([("double", source)]).unwrap();
    let double = registry.get("double").unwrap();
    assert_eq!(double.file(), "<map:double>");
    assert_eq!(double.source(), "function double(x) return 2 * x end");
    assert!(registry.get("missing").is_none());
}

/// A minimal lazy environment built only from the registry's records: globals resolve on
/// first use by running the winner's chunk, keeping only the globals that chunk wins.
/// This is what the sandboxed environment does; here it proves the records suffice.
fn lazy_environment(registry: &Registry) -> Lua {
    let lua = Lua::new();
    let chunks: Vec<(String, String)> = registry
        .chunks()
        .iter()
        .map(|c| (c.file().to_string(), c.source().to_string()))
        .collect();
    let winners: Vec<(String, usize)> = registry
        .iter_functions()
        .map(|(n, f)| (n.to_string(), f.chunk()))
        .collect();
    let globals = lua.globals();
    let meta = lua.create_table().unwrap();
    let index = lua
        .create_function(move |lua, (_globals, name): (Table, String)| {
            let Some(chunk) = winners.iter().find(|(n, _)| *n == name).map(|(_, c)| *c) else {
                return Ok(Value::Nil);
            };
            let winners_here: Vec<String> = winners
                .iter()
                .filter(|(_, c)| *c == chunk)
                .map(|(n, _)| n.clone())
                .collect();
            let real = lua.globals();
            let env = lua.create_table()?;
            let env_meta = lua.create_table()?;
            env_meta.set("__index", real.clone())?;
            let keep =
                lua.create_function(move |lua, (_env, key, value): (Table, String, Value)| {
                    if winners_here.contains(&key) {
                        lua.globals().raw_set(key, value)?;
                    }
                    Ok(())
                })?;
            env_meta.set("__newindex", keep)?;
            env.set_metatable(Some(env_meta))?;
            let (file, source) = &chunks[chunk];
            lua.load(source.as_str())
                .set_name(file.as_str())
                .set_environment(env)
                .exec()?;
            real.raw_get(name)
        })
        .unwrap();
    meta.set("__index", index).unwrap();
    globals.set_metatable(Some(meta)).unwrap();
    lua
}

#[test]
fn load_order_semantics_private_helpers_work_and_calls_reach_the_winner() {
    let registry = Registry::from_paths(LAYERS).unwrap();
    let lua = lazy_environment(&registry);
    let welcome: LuaFunction = lua.globals().get("welcome").unwrap();
    // `welcome` (base) uses its private `decorate` and calls `greet`, overridden later.
    assert_eq!(welcome.call::<String>("ann").unwrap(), "<HELLO ANN>");
    let farewell: LuaFunction = lua.globals().get("farewell").unwrap();
    assert_eq!(farewell.call::<String>("ann").unwrap(), "bye ann");
    // Loading the base chunk (for `welcome`) must not have clobbered the winning `greet`.
    let greet: LuaFunction = lua.globals().get("greet").unwrap();
    assert_eq!(greet.call::<String>("bo").unwrap(), "HELLO BO");
    // Private helpers stay private.
    assert!(matches!(
        lua.globals().get::<Value>("decorate").unwrap(),
        Value::Nil
    ));
}

#[test]
fn eager_loading_in_load_order_gives_the_same_answers() {
    let registry = Registry::from_paths(LAYERS).unwrap();
    let lua = Lua::new();
    for chunk in registry.chunks() {
        lua.load(chunk.source())
            .set_name(chunk.file())
            .exec()
            .unwrap();
    }
    let welcome: LuaFunction = lua.globals().get("welcome").unwrap();
    assert_eq!(welcome.call::<String>("ann").unwrap(), "<HELLO ANN>");
}
