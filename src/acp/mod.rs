//! `rlm acp`: the RLM as an Agent Client Protocol agent (JSON-RPC 2.0 over stdio), for
//! editors (Zed, JetBrains, Neovim and Emacs clients) and for harnesses that drive
//! agents through ACP (verifiers' `ACPHarness`).
//!
//! The command-line tool and the Python package (`python -m rlm_registry acp`) both
//! configure an [`Rlm`] as they do for `ask`, then hand it to [`AcpAgent::serve`].
//!
//! ```no_run
//! use std::sync::Arc;
//! use rlm_registry::{Registry, acp::AcpAgent, llm::LlmClient, rlm::Rlm};
//!
//! let rlm = Rlm::new(Arc::new(LlmClient::from_env()?), Registry::baked().clone(), 10);
//! let stdin = std::io::stdin().lock();
//! AcpAgent::new(rlm).serve(stdin, std::io::stdout())?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::io::{self, BufRead, Write};
use std::path::PathBuf;

use crate::rlm::Rlm;

/// An ACP agent: each session runs the loop `rlm` configures, over the session's
/// context.
pub struct AcpAgent {
    rlm: Rlm,
    context_paths: Vec<PathBuf>,
}

impl AcpAgent {
    /// An agent whose sessions run `rlm` (its model, limits and budgets, per prompt).
    pub fn new(rlm: Rlm) -> AcpAgent {
        AcpAgent {
            rlm,
            context_paths: Vec::new(),
        }
    }

    /// The context of every session (`--context`), over the `cwd` a client sends.
    pub fn context_paths(mut self, paths: Vec<PathBuf>) -> AcpAgent {
        self.context_paths = paths;
        self
    }

    /// Answers the client on `input`/`output` until `input` ends.
    pub fn serve(
        self,
        input: impl BufRead + Send + 'static,
        output: impl Write + Send + 'static,
    ) -> io::Result<()> {
        let _ = (self.rlm, self.context_paths, input, output);
        Err(io::Error::other("rlm acp: not built yet"))
    }
}
