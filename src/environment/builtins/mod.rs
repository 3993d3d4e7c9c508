//! The built-ins implemented in Rust and present in every environment, and the host's own
//! provider functions, installed in one read-only table behind the globals so model code
//! cannot replace them.
//!
//! What each built-in is (name, provider, scope, doc) is declared once, in
//! [`conventions::builtins::BUILTINS`](crate::conventions::builtins::BUILTINS); `help`, the
//! prompt and every listing read it from there. This module only implements them: the
//! installer matches exhaustively on [`BuiltinId`], so adding a row to the table without
//! an implementation does not compile. One file per provider: `core.rs` (`print`,
//! `FINAL`, `token_*`), `session_variables.rs` (`store_list`, `store_summarize`) and
//! `discovery.rs` (also `core`), `llm.rs` and `parallel.rs` (the scheduler of `parallel`
//! and `parallel_map`, also `llm`), `agent.rs`, `user.rs`, `json/`, `csv/`; the four
//! sub-call built-ins share `sub_calls.rs` (a call prepared, sent, made a value); the
//! `re` provider and the library's primitives (`_text_primitives.*`, provider
//! `Primitives`, installed in every environment whatever its scope) are the text engines'
//! (`engines::re`, `engines::text`). The values a built-in table holds besides its
//! functions ([`BUILTIN_VALUES`]: `json.null`) are added to their provider's table where
//! that provider's functions are installed.

mod agent;
mod core;
mod csv;
mod discovery;
mod host;
mod images;
mod json;
mod llm;
mod options;
mod parallel;
mod reading;
mod session_variables;
mod state;
mod sub_calls;
mod user;

use std::rc::Rc;
use std::sync::Arc;

use mlua::{Function, Lua, Table, Value};

use crate::environment::chunks::InternalChunk;

use super::answer_schema::AnswerSchema;
use super::errors::raise_plain_errors;
use super::limits::Tripwire;
use crate::catalog::Catalog;
use crate::conventions::TEXT_PRIMITIVES_GLOBAL;
use crate::conventions::builtins::{BUILTIN_VALUES, BuiltinId, BuiltinProvider, BuiltinValueId};
use crate::engines::collections::Primitive as Collection;
use crate::engines::text::{self, Primitive};
use crate::engines::{doc_search, re};
use crate::providers::HostHandler;
pub(crate) use core::{Giver, give_answer};
pub(crate) use state::{BuiltinState, Host};

/// The human behind `ask_user` and `notify_user`, as the host provides them (the CLI uses
/// the terminal). Only a top-level environment has one.
pub trait User {
    /// Asks `question` and waits for the answer.
    fn ask(&self, question: &str) -> Result<String, String>;
    /// Shows `message` without waiting.
    fn notify(&self, message: &str) -> Result<(), String>;
}

/// The host's way to run a child RLM for `rlm_query`: the RLM loop implements it, one
/// level deeper. `Send + Sync` so a batch can run children on several threads (each child
/// builds its own environment there).
///
/// ```
/// use std::sync::Arc;
/// use rlm_registry::{Registry, environment::{Environment, SubAgent, SubTask}};
///
/// /// Answers every sub-task with its length; with a schema, as a JSON object.
/// struct Measure;
/// impl SubAgent for Measure {
///     fn run(&self, task: &SubTask) -> Result<String, String> {
///         let n = task.prompt.len();
///         Ok(match &task.schema {
///             Some(_) => format!("{{\"length\": {n}}}"),
///             None => n.to_string(),
///         })
///     }
/// }
///
/// let env = Environment::builder(Registry::baked().clone()).sub_agent(Arc::new(Measure)).build()?;
/// let run = env.execute("print(rlm_query('four'), rlm_query('four', {schema = {type = 'object'}}).length)")?;
/// assert_eq!(run.output, "4\t4\n");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait SubAgent: Send + Sync {
    /// Runs a child on `task` and returns its final answer: with a schema, the JSON text
    /// of a value that matches it, which `rlm_query` gives the caller's code as a Lua
    /// value.
    fn run(&self, task: &SubTask) -> Result<String, String>;

    /// Runs a child per task of one `rlm_query_batched` call, concurrently, and returns
    /// their answers in the order of `tasks`. The default runs [`SubAgent::run`] for each
    /// through [`run_on_threads`]; a host that names or numbers its children overrides it
    /// to do so in the batch's order before any starts, since threads start in any order.
    fn run_batch(&self, tasks: &[SubTask]) -> Vec<Result<String, String>> {
        run_on_threads(tasks, |_, task| self.run(task))
    }
}

/// One child of an `rlm_query` or `rlm_query_batched` call: its prompt, its context, the
/// schema its answer must match and the images its model sees with the prompt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubTask {
    /// The sub-task.
    pub prompt: String,
    /// Its context, if the call gave one.
    pub context: Option<String>,
    /// The schema of its answer (`opts.schema`), if the call gave one.
    pub schema: Option<AnswerSchema>,
    /// Images sent with its task to its model (`opts.images`), if the call gave any.
    pub images: Vec<crate::llm::ImagePart>,
}

impl SubTask {
    /// A sub-task without context or schema.
    pub fn new(prompt: impl Into<String>) -> SubTask {
        SubTask {
            prompt: prompt.into(),
            context: None,
            schema: None,
            images: Vec::new(),
        }
    }
}

/// Runs `run(index, task)` for every task, each on its own scoped thread, and returns the
/// results in the order of `tasks`; a child that panics is an error, not a crash of the
/// batch.
///
/// ```
/// use rlm_registry::environment::{SubTask, run_on_threads};
///
/// let tasks: Vec<SubTask> = ["a", "bb"].into_iter().map(SubTask::new).collect();
/// let answers = run_on_threads(&tasks, |i, task| Ok(format!("{i}:{}", task.prompt.len())));
/// assert_eq!(answers, [Ok("0:1".to_string()), Ok("1:2".to_string())]);
/// ```
pub fn run_on_threads(
    tasks: &[SubTask],
    run: impl Fn(usize, &SubTask) -> Result<String, String> + Sync,
) -> Vec<Result<String, String>> {
    std::thread::scope(|scope| {
        let run = &run;
        let handles: Vec<_> = tasks
            .iter()
            .enumerate()
            .map(|(i, task)| scope.spawn(move || run(i, task)))
            .collect();
        handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|_| Err("the child agent crashed".to_string()))
            })
            .collect()
    })
}

/// Every host function of the environment's providers, by name: the built-ins, made
/// here, and the host's own, wrapped. A built-in named `table.field` (`re.find`) goes
/// into a read-only table under `table`. Out-of-scope names raise an error naming their
/// scope. Lua's own `print` is removed from the globals.
pub(crate) fn table(
    lua: &Lua,
    state: &Rc<BuiltinState>,
    catalog: &Arc<Catalog>,
    regexes: &Rc<re::RegexCache>,
) -> mlua::Result<Table> {
    let builtins = lua.create_table()?;
    let mut installer = Installer {
        lua,
        state,
        catalog,
        regexes,
        session_variables: None,
        parallel: None,
    };
    let mut tables: Vec<(&str, Table)> = Vec::new();
    let mut keep_errors: Vec<&str> = Vec::new();
    let scope = catalog.scope();
    for info in catalog.providers().iter() {
        let name = info.name();
        let function = if !scope.allows(info.scope()) {
            host::refuse(lua, scope.refusal(name, info.scope()))?
        } else {
            match &info.host().handler {
                HostHandler::Builtin(id) => installer.builtin(*id)?,
                HostHandler::Raw(handler) => {
                    keep_errors.push(name);
                    let effect = info.host().effect;
                    host::host_raw(lua, state, catalog, name, effect, Arc::clone(handler))?
                }
                HostHandler::Json(handler) => {
                    keep_errors.push(name);
                    let (params, effect) = (info.function().params(), info.host().effect);
                    host::host_json(
                        lua,
                        state,
                        catalog,
                        name,
                        params,
                        effect,
                        Arc::clone(handler),
                    )?
                }
            }
        };
        match name.split_once('.') {
            Some((table, field)) => sub_table(lua, &mut tables, table)?.raw_set(field, function)?,
            None => builtins.raw_set(name, function)?,
        }
    }
    // The library's primitives are not the model's: every environment has them, in no
    // provider, whatever its scope.
    for primitive in BuiltinProvider::Primitives.functions() {
        let function = installer.builtin(primitive.id)?;
        let field = primitive.field().unwrap_or(primitive.name);
        sub_table(lua, &mut tables, primitive.global())?.raw_set(field, function)?;
    }
    // `print` is hot in loops and cannot fail but on memory; host functions raise plain
    // errors already; the schedulers are Lua, raising their errors at the caller's line,
    // and run code whose errors must keep their own.
    keep_errors.push(BuiltinId::Print.name());
    keep_errors.push(BuiltinId::Parallel.name());
    keep_errors.push(BuiltinId::ParallelMap.name());
    raise_plain_errors(lua, &builtins, &keep_errors, None)?;
    for (name, functions) in tables {
        // A primitive's argument error names its field only: that is the name of the
        // library function that called it (`lines`), the one the model knows.
        let shown_table = (name != TEXT_PRIMITIVES_GLOBAL).then_some(name);
        raise_plain_errors(lua, &functions, &[], shown_table)?;
        for value in BUILTIN_VALUES {
            let (table, field) = value.table_and_field();
            if table == name {
                functions.raw_set(field, builtin_value(value.id))?;
            }
        }
        builtins.raw_set(name, read_only(lua, name, functions)?)?;
    }
    lua.globals().raw_set(BuiltinId::Print.name(), Value::Nil)?;
    Ok(builtins)
}

/// The table a dotted built-in's name starts with, made the first time.
fn sub_table<'n, 't>(
    lua: &Lua,
    tables: &'t mut Vec<(&'n str, Table)>,
    name: &'n str,
) -> mlua::Result<&'t Table> {
    let at = match tables.iter().position(|(existing, _)| *existing == name) {
        Some(at) => at,
        None => {
            tables.push((name, lua.create_table()?));
            tables.len() - 1
        }
    };
    Ok(&tables[at].1)
}

/// The value of a built-in value (`json.null`).
fn builtin_value(id: BuiltinValueId) -> Value {
    match id {
        BuiltinValueId::JsonNull => json::null(),
    }
}

/// A proxy that reads `functions` and refuses assignments, as the globals refuse them.
fn read_only(lua: &Lua, name: &str, functions: Table) -> mlua::Result<Table> {
    READ_ONLY.function(lua)?.call((name, functions))
}

/// Makes the built-ins of one environment.
struct Installer<'a> {
    lua: &'a Lua,
    state: &'a Rc<BuiltinState>,
    catalog: &'a Arc<Catalog>,
    regexes: &'a Rc<re::RegexCache>,
    /// `store_list` and `store_summarize`, made together by one chunk.
    session_variables: Option<(Function, Function)>,
    /// The scheduler of `parallel` and `parallel_map`, which the sub-call built-ins
    /// yield to.
    parallel: Option<Rc<parallel::Parallel>>,
}

impl Installer<'_> {
    /// The implementation of `id`, made for this environment.
    fn builtin(&mut self, id: BuiltinId) -> mlua::Result<Function> {
        let (lua, state, catalog) = (self.lua, Rc::clone(self.state), self.catalog);
        let tripwire: &Rc<Tripwire> = &self.state.tripwire;
        let re = |implementation| re::function(lua, &tripwire.guard, self.regexes, implementation);
        let primitive = |which| text::primitive(lua, &tripwire.guard, self.regexes, which);
        match id {
            BuiltinId::Print => core::print(lua, state),
            BuiltinId::Final => core::final_value(lua, state),
            BuiltinId::FinalVar => core::final_var(lua, state),
            BuiltinId::TokenCount => core::token_count(lua),
            BuiltinId::TokenTruncate => core::token_truncate(lua),
            BuiltinId::TokenSplit => core::token_split(lua),
            BuiltinId::TokenBudget => core::token_budget(lua, state),
            BuiltinId::Budget => core::budget(lua, state, catalog.scope().depth),
            BuiltinId::StoreList => Ok(self.session_variables()?.0),
            BuiltinId::StoreSummarize => Ok(self.session_variables()?.1),
            BuiltinId::FnSearch => discovery::fn_search(lua, state, Arc::clone(catalog)),
            BuiltinId::Help => discovery::help(lua, Arc::clone(catalog)),
            BuiltinId::DocSearch => doc_search::function(lua, &tripwire.guard),
            BuiltinId::ReFind => re(re::Implementation::Find),
            BuiltinId::ReMatch => re(re::Implementation::Match),
            BuiltinId::ReGmatch => re(re::Implementation::Gmatch),
            BuiltinId::ReFindAll => re(re::Implementation::FindAll),
            BuiltinId::ReCount => re(re::Implementation::Count),
            BuiltinId::ReSplit => re(re::Implementation::Split),
            BuiltinId::ReGsub | BuiltinId::ReReplace => re(re::Implementation::Gsub),
            BuiltinId::JsonDecode => json::decode(lua, tripwire),
            BuiltinId::JsonEncode => json::encode(lua, tripwire),
            BuiltinId::JsonLines => json::lines(lua, tripwire),
            BuiltinId::JsonArray => json::array(lua),
            BuiltinId::CsvParse => csv::parse(lua, tripwire),
            BuiltinId::CsvRows => csv::rows(lua, tripwire),
            BuiltinId::CsvEncode => csv::encode(lua, tripwire),
            BuiltinId::LlmQuery => self.parallel()?.yielding(llm::llm_query(lua, state)?),
            BuiltinId::LlmQueryBatched => self
                .parallel()?
                .yielding(llm::llm_query_batched(lua, state)?),
            BuiltinId::RlmQuery => self.parallel()?.yielding(agent::rlm_query(lua, state)?),
            BuiltinId::RlmQueryBatched => self
                .parallel()?
                .yielding(agent::rlm_query_batched(lua, state)?),
            BuiltinId::Parallel => Ok(self.parallel()?.parallel.clone()),
            BuiltinId::ParallelMap => Ok(self.parallel()?.parallel_map.clone()),
            BuiltinId::AskUser => user::ask_user(lua, state),
            BuiltinId::NotifyUser => user::notify_user(lua, state),
            BuiltinId::LineCount => primitive(Primitive::LineCount),
            BuiltinId::Lines => primitive(Primitive::Lines),
            BuiltinId::JoinLines => primitive(Primitive::JoinLines),
            BuiltinId::WordCount => primitive(Primitive::WordCount),
            BuiltinId::FindAll => primitive(Primitive::FindAll),
            BuiltinId::FindAllRegex => primitive(Primitive::FindAllRegex),
            BuiltinId::Grep => primitive(Primitive::Grep),
            BuiltinId::ChunkByLines => primitive(Primitive::ChunkByLines),
            BuiltinId::ChunkBySeparator => primitive(Primitive::ChunkBySeparator),
            BuiltinId::ChunkBySize => primitive(Primitive::ChunkBySize),
            BuiltinId::DocList => primitive(Primitive::DocList),
            BuiltinId::SortBy => primitive(Primitive::Collection(Collection::SortBy)),
            BuiltinId::Count => primitive(Primitive::Collection(Collection::Count)),
            BuiltinId::GroupBy => primitive(Primitive::Collection(Collection::GroupBy)),
            BuiltinId::MostCommon => primitive(Primitive::Collection(Collection::MostCommon)),
        }
    }

    fn parallel(&mut self) -> mlua::Result<Rc<parallel::Parallel>> {
        if let Some(made) = &self.parallel {
            return Ok(Rc::clone(made));
        }
        let made = Rc::new(parallel::Parallel::new(self.lua, Rc::clone(self.state))?);
        self.parallel = Some(Rc::clone(&made));
        Ok(made)
    }

    fn session_variables(&mut self) -> mlua::Result<(Function, Function)> {
        if let Some(made) = &self.session_variables {
            return Ok(made.clone());
        }
        let made = session_variables::functions(self.lua, Arc::clone(self.catalog.registry()))?;
        self.session_variables = Some(made.clone());
        Ok(made)
    }
}

static READ_ONLY: InternalChunk = InternalChunk::new(
    "=builtin",
    r#"
        local name, functions = ...
        return setmetatable({}, {
          __index = functions,
          __newindex = function(_, key)
            error("cannot assign to built-in '" .. name .. "." .. tostring(key) .. "'", 2)
          end,
          __pairs = function() return next, functions, nil end,
          __metatable = false,
        })
        "#,
);
