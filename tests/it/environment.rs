//! The environment: lazy loading of registry functions with load-order
//! semantics, the context, and REPL state.

use rlm_registry::Registry;
use rlm_registry::environment::{Environment, Limits};

fn run(env: &Environment, code: &str) -> String {
    env.execute(code)
        .unwrap_or_else(|e| panic!("`{code}`: {e}"))
        .output
}

fn layered() -> Environment {
    let registry = Registry::from_paths([
        "tests/fixtures/layers/base",
        "tests/fixtures/layers/override",
    ])
    .unwrap();
    Environment::new(registry, Limits::default()).unwrap()
}

#[test]
fn registry_functions_are_not_defined_until_first_use() {
    let env = layered();
    assert_eq!(run(&env, "print(rawget(_G, 'welcome'))"), "nil\n");
    assert_eq!(run(&env, "print(type(welcome))"), "function\n");
    assert_eq!(
        run(&env, "print(type(rawget(_G, 'welcome')))"),
        "function\n"
    );
}

#[test]
fn private_helpers_work_and_calls_reach_the_overriding_winner() {
    let env = layered();
    assert_eq!(run(&env, "print(welcome('ann'))"), "<HELLO ANN>\n");
    assert_eq!(
        run(&env, "print(greet('bo'), farewell('bo'))"),
        "HELLO BO\tbye bo\n"
    );
    assert_eq!(run(&env, "print(decorate)"), "nil\n");
}

#[test]
fn loading_a_file_does_not_clobber_a_winner_already_loaded() {
    let env = layered();
    assert_eq!(run(&env, "print(greet('x'))"), "HELLO X\n");
    // `farewell` lives in the base file, which also defines the losing `greet`.
    assert_eq!(
        run(&env, "print(farewell('x'), greet('x'))"),
        "bye x\tHELLO X\n"
    );
}

#[test]
fn unknown_globals_are_nil_and_calling_them_names_them() {
    let env = layered();
    let error = env.execute("no_such_function()").unwrap_err();
    assert!(
        error.message().contains("no_such_function"),
        "{}",
        error.message()
    );
}

#[test]
fn baked_library_functions_run_on_the_context() {
    let env = Environment::new(Registry::baked().clone(), Limits::default()).unwrap();
    env.set_context("one\ntwo\nthree\n").unwrap();
    assert_eq!(
        run(
            &env,
            "print(line_count(context), #chunk_by_lines(context, 2))"
        ),
        "3\t2\n"
    );
}

#[test]
fn a_large_context_loads() {
    let env = Environment::new(Registry::baked().clone(), Limits::default()).unwrap();
    let text = "x".repeat(100 * 1024 * 1024);
    env.set_context(&text).unwrap();
    assert_eq!(run(&env, "print(#context)"), format!("{}\n", text.len()));
}

#[test]
fn user_code_may_redefine_a_registry_function_for_its_session() {
    let env = layered();
    run(&env, "function greet(n) return 'hi ' .. n end");
    assert_eq!(run(&env, "print(welcome('z'))"), "<hi z>\n");
}

#[test]
fn each_final_answer_is_taken_by_the_execution_that_gave_it() {
    let env = Environment::new(Registry::baked().clone(), Limits::default()).unwrap();
    env.execute("FINAL('first')").unwrap();
    assert_eq!(env.final_answer().as_deref(), Some("first"));
    assert_eq!(env.take_final_answer().as_deref(), Some("first"));
    assert_eq!(env.final_answer(), None);
    // An answer given before an error in the same execution is still given.
    env.execute("answer = 42 FINAL_VAR('answer') error('after')")
        .unwrap_err();
    assert_eq!(env.take_final_answer().as_deref(), Some("42"));
    env.execute("x = 1").unwrap();
    assert_eq!(env.take_final_answer(), None);
}
