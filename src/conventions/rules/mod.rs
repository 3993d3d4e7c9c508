//! One module per convention rule, each producing its own diagnostics.
//!
//! | module | codes |
//! |---|---|
//! | [`syntax`] | E001 |
//! | [`doc_comment`] | E002, E003 |
//! | [`params`] | E004 |
//! | [`returns`] | E005 |
//! | [`scope`] | E006 |
//! | [`side_effects`] | E007 |
//! | [`reserved`] | E008 |
//! | [`duplicates`] | E009 |
//! | [`examples`] | E012 |
//!
//! E010 (unreadable files) and E011 (`from_map` keys) concern whole inputs and live
//! with the loader in `registry::load`.

pub(crate) mod doc_comment;
pub(crate) mod duplicates;
pub(crate) mod examples;
pub(crate) mod params;
pub(crate) mod reserved;
pub(crate) mod returns;
pub(crate) mod scope;
pub(crate) mod side_effects;
pub(crate) mod syntax;
