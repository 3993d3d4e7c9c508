//! Looking at a run: reads the JSONL trace the [`rlm`](crate::rlm) loop writes and shows
//! it as a tree in the terminal, as one self-contained HTML page, or in the reference
//! RLM's log format.
//!
//! This module sits above `rlm`: it reads the records `rlm` writes with their own types
//! ([`rlm::trajectory`](crate::rlm::trajectory), which documents the format), and uses
//! `rlm`'s converter to the reference format. It sits below `serve` and `cli`.
//! [`Trace::read`] is the entry point; the renderers take a [`Trace`].
//!
//! ```no_run
//! use rlm_registry::trace::{self, Trace};
//!
//! let run = Trace::read("run.jsonl")?;
//! print!("{}", trace::show(&run));
//! std::fs::write("run.html", trace::html(&run, "run.jsonl"))?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Where things are
//!
//! - `model`: [`Trace`], [`Agent`] and the reader; [`Turn`] and [`Block`] are the
//!   trajectory's records.
//! - `tree`: the terminal tree, one agent, one turn in full, and their JSON.
//! - `html`: the page (its template is `page.html`, inline CSS and JS).
//! - `export`: the reference RLM's log format.
//! - `text`: numbers, durations and first lines for the renderers.

mod export;
mod html;
mod model;
mod text;
mod tree;

pub use export::{ExportOptions, export_rlm};
pub use html::html;
pub use model::{
    Agent, Block, BlockStatus, LineProblem, Outcome, Setup, Summary, Trace, TraceError, Turn,
};
pub use tree::{agent_json, show, show_agent, show_json, show_turn, turn_json};
