//! Re-execution with recorded values, checkpoints and forks.
//!
//! A checkpoint is not a memory image but the journal of what ran (see `journal`): each
//! execution's code, the values it read from outside the sandbox and the answers its
//! sub-calls got, and each global the host set; beside them the SHA-256 of the context
//! as loaded and of the registry's sources, and the format's version. Restoring runs
//! the steps again in a fresh environment with the recorded values and answers: no model
//! is asked, no file or program is touched, and the globals come out as they were. So a
//! checkpoint is small (the code, not the heap; the context by its digest) and portable
//! between processes and machines.

use std::fmt;

use mlua::Value;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::context::LOADED_CONTEXT;
use super::journal::Step;
use super::{Environment, EnvironmentBuilder, ExecError, JournalEntry, lua_json};

/// The checkpoint format's name and version: a checkpoint of another version is refused.
const FORMAT: &str = "rlm-checkpoint";
const VERSION: u32 = 1;

/// A checkpoint of an [`Environment`]: see [`Environment::checkpoint`].
///
/// ```
/// use rlm_registry::{Registry, environment::{Checkpoint, Environment}};
///
/// let env = Environment::builder(Registry::baked().clone()).build()?;
/// env.execute("seen = {'a', 'b'}")?;
/// let bytes = env.checkpoint()?.to_bytes();
/// let again = Environment::builder(Registry::baked().clone()).build()?;
/// again.restore(&Checkpoint::from_bytes(&bytes)?)?;
/// assert_eq!(again.execute("print(#seen)")?.output, "2\n");
/// assert!(Checkpoint::from_bytes(b"garbage").is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    format: String,
    version: u32,
    /// SHA-256 of the registry's sources, in order.
    registry: String,
    /// SHA-256 of the context as loaded, if one was.
    #[serde(default)]
    context: Option<String>,
    steps: Vec<Step>,
}

/// Why a checkpoint cannot be read or restored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckpointError {
    /// The bytes are not a checkpoint, or one of another format version.
    Format(String),
    /// It was taken with another context or registry, or the environment is not fresh.
    Mismatch(String),
    /// The environment failed to run what restoring needs (building it, loading the
    /// context).
    Environment(String),
}

impl fmt::Display for CheckpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckpointError::Format(why) => write!(f, "not a checkpoint this version reads: {why}"),
            CheckpointError::Mismatch(why) | CheckpointError::Environment(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for CheckpointError {}

impl From<ExecError> for CheckpointError {
    fn from(error: ExecError) -> Self {
        CheckpointError::Environment(error.message().to_string())
    }
}

impl Checkpoint {
    /// The checkpoint as bytes (JSON), to keep or send elsewhere.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// A checkpoint from [`Checkpoint::to_bytes`]'s bytes; anything else, or a checkpoint
    /// of another format version, is an error saying so.
    pub fn from_bytes(bytes: &[u8]) -> Result<Checkpoint, CheckpointError> {
        let checkpoint: Checkpoint = serde_json::from_slice(bytes)
            .map_err(|error| CheckpointError::Format(error.to_string()))?;
        if checkpoint.format != FORMAT {
            return Err(CheckpointError::Format(format!(
                "its format is `{}`, not `{FORMAT}`",
                checkpoint.format
            )));
        }
        if checkpoint.version != VERSION {
            return Err(CheckpointError::Format(format!(
                "it is version {}; this version reads version {VERSION}",
                checkpoint.version
            )));
        }
        Ok(checkpoint)
    }

    #[cfg(feature = "serve")]
    /// The checkpoint a session's journal file holds: its header line, then one step a
    /// line; a torn last line (the process died writing it) is left out.
    pub(crate) fn from_journal(text: &str) -> Result<Checkpoint, CheckpointError> {
        let mut lines = text.lines();
        let header = lines.next().unwrap_or_default();
        let mut checkpoint = Checkpoint::from_bytes(header.as_bytes())?;
        let lines: Vec<&str> = lines.filter(|line| !line.trim().is_empty()).collect();
        for (i, line) in lines.iter().enumerate() {
            match serde_json::from_str::<Step>(line) {
                Ok(step) => checkpoint.steps.push(step),
                Err(_) if i + 1 == lines.len() && !text.ends_with('\n') => break,
                Err(error) => {
                    return Err(CheckpointError::Format(format!("line {}: {error}", i + 2)));
                }
            }
        }
        Ok(checkpoint)
    }

    /// How many steps (executions and globals set) it holds.
    pub fn steps(&self) -> usize {
        self.steps.len()
    }
}

impl Environment {
    /// Hands the next execution the journal a recorded run of the same code made: its
    /// clock readings, random seed, `ask_user` answers and host functions' results are
    /// given back in order instead of read again (see [`JournalEntry`]).
    ///
    /// ```
    /// use rlm_registry::{Registry, environment::Environment};
    ///
    /// let env = Environment::builder(Registry::baked().clone()).build()?;
    /// env.execute("t = os.time()")?;
    /// let journal = env.last_journal();
    /// assert_eq!(journal[0].call, "os.time");
    /// let again = Environment::builder(Registry::baked().clone()).build()?;
    /// again.give_back_journal(journal);
    /// again.execute("t = os.time()")?;
    /// assert_eq!(again.get_global("t")?, env.get_global("t")?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn give_back_journal(&self, entries: Vec<JournalEntry>) {
        self.state.journal.give_back(entries);
    }

    /// The journal of the last execution: what it read from outside the sandbox.
    pub fn last_journal(&self) -> Vec<JournalEntry> {
        self.state.journal.last()
    }

    /// Where re-executions asked for something else than their given-back journal held
    /// (they got live values there), since last taken.
    pub fn take_journal_divergences(&self) -> Vec<String> {
        self.state.journal.take_divergences()
    }

    /// A checkpoint of the session: everything run so far, to rebuild it elsewhere with
    /// [`Environment::restore`].
    pub fn checkpoint(&self) -> Result<Checkpoint, CheckpointError> {
        Ok(Checkpoint {
            format: FORMAT.to_string(),
            version: VERSION,
            registry: self.registry_digest(),
            context: self.context_digest()?,
            steps: self.state.journal.steps(),
        })
    }

    /// Rebuilds the session `checkpoint` was taken of in this fresh environment (built
    /// with the same registry, its context loaded): every step runs again with its
    /// recorded values and answers, sending nothing and touching nothing outside.
    /// Refused, naming what differs, for another context or registry, or an environment
    /// that has run code already. Returns where a step asked for something else than
    /// recorded (it then got live values), if anywhere.
    ///
    /// ```
    /// use rlm_registry::{Registry, environment::Environment};
    ///
    /// let env = Environment::builder(Registry::baked().clone()).build()?;
    /// env.set_context("one")?;
    /// env.execute("started = os.clock()")?;
    /// let checkpoint = env.checkpoint()?;
    /// let again = Environment::builder(Registry::baked().clone()).build()?;
    /// again.set_context("one")?;
    /// assert!(again.restore(&checkpoint)?.is_empty(), "nothing diverged");
    /// assert_eq!(again.get_global("started")?, env.get_global("started")?);
    /// let other = Environment::builder(Registry::baked().clone()).build()?;
    /// other.set_context("two")?;
    /// assert!(other.restore(&checkpoint).unwrap_err().to_string().contains("another context"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn restore(&self, checkpoint: &Checkpoint) -> Result<Vec<String>, CheckpointError> {
        self.check_restorable(checkpoint)?;
        for step in &checkpoint.steps {
            match step {
                Step::Execute {
                    code,
                    code_base64,
                    journal,
                    answers,
                } => {
                    let code = Step::code(code, code_base64.as_deref())
                        .map_err(CheckpointError::Format)?;
                    self.state.journal.give_back(journal.clone());
                    self.state.journal.give_back_answers(answers.clone());
                    // A step that failed when it ran fails again: that is its outcome.
                    let _ = self.execute_bytes(&code);
                }
                Step::SetGlobal { name, value } => self.set_global(name, value)?,
                Step::SetGlobalBytes { name, base64 } => {
                    let bytes = Step::code("", Some(base64)).map_err(CheckpointError::Format)?;
                    self.set_global_value(name, &super::GlobalValue::String(bytes))
                        .map_err(|error| CheckpointError::Environment(error.to_string()))?;
                }
                Step::SetContext { text } => self.set_context_logged(text)?,
            }
        }
        Ok(self.take_journal_divergences())
    }

    /// An independent copy of the session, with the same globals: a new environment
    /// built as this one was (registry, providers, limits, model), given the same
    /// context and restored from this one's checkpoint. For branching rollouts.
    ///
    /// ```
    /// use rlm_registry::{Registry, environment::Environment};
    ///
    /// let env = Environment::builder(Registry::baked().clone()).build()?;
    /// env.set_context("a\nb\n")?;
    /// env.execute("n = line_count(context)")?;
    /// let fork = env.fork()?;
    /// fork.execute("n = n + 10")?;
    /// assert_eq!(env.execute("print(n)")?.output, "2\n");
    /// assert_eq!(fork.execute("print(n)")?.output, "12\n");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn fork(&self) -> Result<Environment, CheckpointError> {
        let checkpoint = self.checkpoint()?;
        let catalog = self.catalog();
        let fork = EnvironmentBuilder {
            registry: std::sync::Arc::clone(catalog.registry()),
            limits: self.tripwire.limits,
            host: self.state.host(),
            providers: std::sync::Arc::clone(catalog.providers()),
            scope: catalog.scope(),
        }
        .build()
        .map_err(|error| CheckpointError::Environment(error.to_string()))?;
        if let Some(copy) = self.context_copy()? {
            fork.load_context_copy(&copy)?;
        }
        // The same registry and a copy of the context: nothing to check, nor to hash.
        fork.state
            .journal
            .set_context_digest(checkpoint.context.clone());
        fork.restore(&checkpoint)?;
        Ok(fork)
    }

    /// [`Environment::set_context`] with `text`, logged as a step of the session, so a
    /// checkpoint taken before it (a server's session journal) restores it.
    pub(crate) fn set_context_logged(&self, text: &str) -> Result<(), ExecError> {
        self.set_context(text)?;
        self.state.journal.context_set(text);
        Ok(())
    }

    #[cfg(feature = "serve")]
    /// The first line of a session's journal file: its checkpoint without steps.
    pub(crate) fn journal_header(&self) -> Result<String, CheckpointError> {
        let mut header = self.checkpoint()?;
        header.steps.clear();
        String::from_utf8(header.to_bytes()).map_err(|e| CheckpointError::Format(e.to_string()))
    }

    #[cfg(feature = "serve")]
    /// The lines of a session's journal file for the steps after the first `from`, and
    /// how many steps there are now.
    pub(crate) fn journal_lines_from(&self, from: usize) -> (Vec<String>, usize) {
        let steps = self.state.journal.steps_from(from);
        let lines = steps
            .iter()
            .filter_map(|step| serde_json::to_string(step).ok())
            .collect();
        (lines, from + steps.len())
    }

    fn check_restorable(&self, checkpoint: &Checkpoint) -> Result<(), CheckpointError> {
        let ran = self.state.journal.steps().len();
        if ran > 0 {
            return Err(CheckpointError::Mismatch(format!(
                "a checkpoint is restored into a fresh environment; this one has run {ran} step(s)"
            )));
        }
        let registry = self.registry_digest();
        if registry != checkpoint.registry {
            return Err(CheckpointError::Mismatch(format!(
                "the checkpoint was taken with another registry (sha256 {}), this environment's is {}",
                short(&checkpoint.registry),
                short(&registry)
            )));
        }
        let context = self.context_digest()?;
        if context != checkpoint.context {
            let shown = |digest: &Option<String>| match digest {
                Some(digest) => format!("sha256 {}", short(digest)),
                None => "none".to_string(),
            };
            return Err(CheckpointError::Mismatch(format!(
                "the checkpoint was taken with another context ({}), this environment's is {}",
                shown(&checkpoint.context),
                shown(&context)
            )));
        }
        Ok(())
    }

    /// SHA-256 of the registry's sources, file by file in load order.
    fn registry_digest(&self) -> String {
        let mut hasher = Sha256::new();
        for chunk in self.catalog.registry().chunks() {
            for part in [chunk.file(), chunk.source()] {
                hasher.update((part.len() as u64).to_le_bytes());
                hasher.update(part.as_bytes());
            }
        }
        hex(&hasher.finalize())
    }

    /// SHA-256 of the context as loaded: a text's bytes, or a list's JSON.
    fn context_digest(&self) -> Result<Option<String>, CheckpointError> {
        // Hashed once per context loaded: a 10 MB one takes milliseconds.
        if let Some(known) = self.state.journal.context_digest() {
            return Ok(known);
        }
        let digest = self.hash_context()?;
        self.state.journal.set_context_digest(digest.clone());
        Ok(digest)
    }

    fn hash_context(&self) -> Result<Option<String>, CheckpointError> {
        let loaded: Value = self
            .lua
            .named_registry_value(LOADED_CONTEXT)
            .map_err(|error| CheckpointError::Environment(error.to_string()))?;
        let digest = match loaded {
            Value::Nil => return Ok(None),
            Value::String(text) => Sha256::digest(&*text.as_bytes()),
            other => {
                let json = lua_json::to_json(&self.lua, &self.tripwire.guard, &other, "context")
                    .map_err(|error| {
                        CheckpointError::Environment(error.into_lua("").to_string())
                    })?;
                Sha256::digest(json.to_string().as_bytes())
            }
        };
        Ok(Some(hex(&digest)))
    }

    /// A copy of the context as loaded, to load into another environment (on another
    /// thread: the copy is `Send`); `None` without a context.
    ///
    /// ```
    /// use rlm_registry::{Registry, environment::Environment};
    ///
    /// let env = Environment::builder(Registry::baked().clone()).build()?;
    /// env.set_context_list(["a", "b"])?;
    /// let copy = env.context_copy()?.expect("a context");
    /// let copied = std::thread::spawn(move || {
    ///     let other = Environment::builder(Registry::baked().clone()).build().unwrap();
    ///     other.load_context_copy(&copy).unwrap();
    ///     other.execute("print(#context, context[2])").unwrap().output
    /// });
    /// assert_eq!(copied.join().unwrap(), "2\tb\n");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn context_copy(&self) -> Result<Option<ContextCopy>, CheckpointError> {
        let loaded: Value = self
            .lua
            .named_registry_value(LOADED_CONTEXT)
            .map_err(|error| CheckpointError::Environment(error.to_string()))?;
        Ok(match loaded {
            Value::Nil => None,
            Value::String(text) => Some(ContextCopy::Text(text.as_bytes().to_vec())),
            other => {
                let json = lua_json::to_json(&self.lua, &self.tripwire.guard, &other, "context")
                    .map_err(|error| {
                        CheckpointError::Environment(error.into_lua("").to_string())
                    })?;
                Some(ContextCopy::Json(json))
            }
        })
    }

    /// Loads `copy` (from [`Environment::context_copy`]) as this environment's context.
    pub fn load_context_copy(&self, copy: &ContextCopy) -> Result<(), CheckpointError> {
        match copy {
            ContextCopy::Text(text) => self.set_context(text)?,
            ContextCopy::Json(json) => self.set_context_json(json)?,
        }
        Ok(())
    }
}

/// A copy of an environment's context as loaded ([`Environment::context_copy`]).
#[derive(Clone, Debug, PartialEq)]
pub enum ContextCopy {
    /// A text context's bytes.
    Text(Vec<u8>),
    /// A list or documents, by the one Lua ↔ JSON mapping.
    Json(serde_json::Value),
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The start of a digest, as a message shows it.
fn short(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}
