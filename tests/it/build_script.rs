//! Baking from another crate's `build.rs`: the Builder, `include_registry!`, the baked
//! search index, rerun behaviour, and build failure on bad Lua, all through a real `cargo build` of a
//! temporary crate that depends on this one by path.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

struct Consumer {
    dir: tempfile::TempDir,
}

const GOOD: &str = "--- Says hello.\n---@return string greeting Always \"hello\"\nfunction hello()\n  return \"hello\"\nend\n";

impl Consumer {
    fn new() -> Consumer {
        let dir = tempfile::tempdir().unwrap();
        let root = env!("CARGO_MANIFEST_DIR").replace('\\', "/");
        let manifest = format!(
            r#"[package]
name = "baked-consumer"
version = "0.0.0"
edition = "2021"
publish = false

[workspace]

[dependencies]
rlm-registry = {{ path = "{root}", default-features = false }}

[build-dependencies]
rlm-registry = {{ path = "{root}", default-features = false, features = ["build"] }}
"#
        );
        let build_rs = r#"fn main() -> Result<(), Box<dyn std::error::Error>> {
    rlm_registry::codegen::Builder::new().dir("lua").compile()?;
    Ok(())
}
"#;
        let main_rs = r#"rlm_registry::include_registry!();

fn main() {
    // The search index is baked too, identical to one built at run time.
    let built = rlm_registry::search::Index::build(REGISTRY.functions());
    assert!(REGISTRY.index() == &built, "baked index differs");
    for (name, _) in REGISTRY.iter_functions() {
        let options = rlm_registry::search::SearchOptions::default();
        assert_eq!(rlm_registry::search::search_hits(&REGISTRY, name, &options)[0].function.name(), name);
        println!("{name}");
    }
    print!("{}", REGISTRY.system_prompt());
}
"#;
        let consumer = Consumer { dir };
        consumer.write("Cargo.toml", &manifest);
        consumer.write("build.rs", build_rs);
        consumer.write("src/main.rs", main_rs);
        // Same dependency versions as this crate, already downloaded.
        std::fs::copy(
            Path::new(&root).join("Cargo.lock"),
            consumer.path("Cargo.lock"),
        )
        .unwrap();
        consumer.write("lua/hello.lua", GOOD);
        consumer
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    fn write(&self, relative: &str, contents: &str) {
        let path = self.path(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, contents).unwrap();
    }

    fn cargo(&self, args: &[&str]) -> Output {
        let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("consumer-target");
        Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(args)
            .current_dir(self.dir.path())
            .env("CARGO_TARGET_DIR", target)
            .env_remove("RUSTFLAGS")
            .env("CARGO_TERM_COLOR", "never")
            .output()
            .expect("cargo runs")
    }

    /// Runs the consumer binary and returns the names it prints before the prompt.
    fn baked_names(&self) -> Vec<String> {
        let out = self.cargo(&["run", "-q"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .take_while(|l| !l.starts_with("## "))
            .map(str::to_string)
            .collect()
    }

    /// Whether the last `cargo build -v` ran this crate's build script.
    fn build_script_reran(&self) -> bool {
        let out = self.cargo(&["build", "-v"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let log = String::from_utf8_lossy(&out.stderr);
        log.lines().any(|l| {
            l.contains("Running")
                && l.contains("baked-consumer")
                && l.contains("build-script-build")
        })
    }
}

#[test]
fn builder_bakes_another_crates_directory_and_reruns_only_on_lua_changes() {
    let consumer = Consumer::new();
    assert_eq!(consumer.baked_names(), ["hello"]);

    assert!(
        !consumer.build_script_reran(),
        "an unchanged tree must not rerun the build step"
    );

    consumer.write("lua/more/second.lua", &GOOD.replace("hello", "second"));
    assert!(
        consumer.build_script_reran(),
        "a new .lua file must rerun the build step"
    );
    assert_eq!(
        consumer.baked_names(),
        ["hello", "second"],
        "adding a file reruns the step"
    );

    consumer.write("lua/more/second.lua", &GOOD.replace("hello", "renamed"));
    assert_eq!(
        consumer.baked_names(),
        ["hello", "renamed"],
        "editing a file reruns the step"
    );

    std::fs::remove_file(consumer.path("lua/more/second.lua")).unwrap();
    assert_eq!(
        consumer.baked_names(),
        ["hello"],
        "removing a file reruns the step"
    );

    // A file that breaks two conventions in two places: both are reported, at once.
    consumer.write(
        "lua/bad.lua",
        "local x = 1\nfunction no_doc()\nend\nprint(x)\n",
    );
    // An example in a doc comment that does not compile fails the build at its line.
    consumer.write(
        "lua/bad_example.lua",
        "--- Doubles.\n---\n--- ```lua\n--- twice(2) --> = 4\n--- ```\n---@param x number\n---@return number\nfunction twice(x) return 2 * x end\n",
    );
    let out = consumer.cargo(&["build"]);
    assert!(!out.status.success(), "bad Lua must fail the build");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("error[E002]"), "{log}");
    assert!(log.contains("--> lua/bad.lua:2:1"), "{log}");
    assert!(log.contains("error[E007]"), "{log}");
    assert!(log.contains("--> lua/bad.lua:4:1"), "{log}");
    assert!(log.contains("error[E012]"), "{log}");
    assert!(log.contains("--> lua/bad_example.lua:4:1"), "{log}");
    assert!(
        log.contains("2 | function no_doc()"),
        "source line shown: {log}"
    );
    assert!(log.contains("= help:"), "{log}");
}
