//! The call cache from the command line: `--cache FILE`, `--cache-max-mb`, `--cache-lease`,
//! `--no-cache`
//! for `rlm ask`, `eval` and `serve`, and `rlm cache stats | clear`.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Args, Subcommand};
use rlm_registry::llm::inspect_cache;
use rlm_registry::setup::{CacheChoice, CacheLocation, ENV_CACHE, RunSettings};

use super::{EXIT_USAGE, EXIT_VIOLATIONS, Output, SourceArgs};

/// The call cache of a command that calls a model.
#[derive(Args, Debug, Clone)]
pub(crate) struct CacheArgs {
    /// Keep the model's answers in this store and answer a request sent again from it,
    /// at no token cost: a SQLite file (a path, or sqlite://PATH), which several
    /// processes may share, or a Redis server a fleet shares
    /// (`redis://[[USER]:PASSWORD@]HOST[:PORT][/DB][?prefix=P]`, rediss:// for TLS)
    /// (default: RLM_CACHE, else `[cache] path` in rlm.toml; for `rlm eval`, else
    /// OUT/cache.sqlite). A store that cannot be used warns once and the run goes on
    /// uncached.
    #[arg(long, value_name = "STORE")]
    cache: Option<PathBuf>,
    /// The cache's size cap in MiB: past it, the least recently used answers go
    /// (default: `[cache] max_mb` in rlm.toml, else 1024). Not for Redis, which evicts
    /// by its own maxmemory-policy.
    #[arg(long, value_name = "MB", value_parser = clap::value_parser!(u64).range(1..))]
    cache_max_mb: Option<u64>,
    /// How long, in seconds, this process holds a request it is sending: other processes
    /// sharing the cache wait for its answer rather than send the same request, this long
    /// at most (default: `[cache] lease` in rlm.toml, else 120).
    #[arg(long, value_name = "SECS")]
    cache_lease: Option<f64>,
    /// Use no cache, whatever RLM_CACHE or rlm.toml say.
    #[arg(long, conflicts_with = "cache")]
    no_cache: bool,
}

impl CacheArgs {
    /// Writes what was given into `settings`.
    pub(crate) fn write(&self, settings: &mut RunSettings) {
        settings.cache = match (&self.cache, self.no_cache) {
            (_, true) => CacheChoice::Off,
            (Some(path), false) => CacheChoice::At(CacheLocation::parse(&path.to_string_lossy())),
            (None, false) => CacheChoice::Unset,
        };
        settings.cache_max_mb = self.cache_max_mb;
        settings.cache_lease = self.cache_lease;
    }
}

/// `rlm cache`: look at or empty a call cache.
#[derive(Subcommand, Debug, Clone)]
pub(crate) enum CacheCommand {
    /// Print what the store holds: answers, their size, hits and misses, the oldest and
    /// newest answer.
    Stats(CacheFileArgs),
    /// Remove every answer and reset the counters.
    Clear(CacheFileArgs),
}

/// Which cache.
#[derive(Args, Debug, Clone)]
pub(crate) struct CacheFileArgs {
    /// The cache: a file, sqlite://PATH, or redis://… (default: RLM_CACHE, else
    /// `[cache] path` in rlm.toml).
    file: Option<PathBuf>,
    /// The configuration file (default: `rlm.toml` in the current directory, if there is
    /// one).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

impl CacheFileArgs {
    fn location(&self) -> Result<CacheLocation, Output> {
        if let Some(file) = &self.file {
            return Ok(CacheLocation::parse(&file.to_string_lossy()));
        }
        let source = SourceArgs {
            paths: Vec::new(),
            no_baked: false,
            config: self.config.clone(),
        };
        let setup = source.run_setup(&RunSettings::default(), &Default::default())?;
        if let Some((location, _)) = setup.cache {
            return Ok(location);
        }
        Err(Output::failure(
            EXIT_USAGE,
            format!(
                "error: which cache? Give the file, or set {ENV_CACHE}, or `[cache] path` in rlm.toml\n"
            ),
        ))
    }
}

pub(crate) fn run(command: &CacheCommand) -> Output {
    let (CacheCommand::Stats(args) | CacheCommand::Clear(args)) = command;
    let location = match args.location() {
        Ok(location) => location,
        Err(output) => return output,
    };
    let cache = match inspect_cache(&location.to_string()) {
        Ok(cache) => cache,
        // Naming no store (a missing file, an unknown scheme) is a usage error; one that
        // is there but unreadable is a failure of the work.
        Err(error) if !matches!(&location, CacheLocation::File(path) if path.exists()) => {
            return Output::failure(EXIT_USAGE, format!("error: {error}\n"));
        }
        Err(error) => return Output::failure(EXIT_VIOLATIONS, format!("error: {error}\n")),
    };
    let done = match command {
        CacheCommand::Stats(_) => cache
            .stats()
            .map(|stats| stats_text(&cache.location(), &location, &stats)),
        CacheCommand::Clear(_) => cache
            .clear()
            .map(|removed| format!("removed {removed} answers from {}\n", cache.location())),
    };
    match done {
        Ok(text) => Output::success(text),
        Err(error) => {
            let hint = match location {
                CacheLocation::File(_) => "(delete the file to start a new cache)\n",
                CacheLocation::Url(_) => "",
            };
            Output::failure(EXIT_VIOLATIONS, format!("error: {error}\n{hint}"))
        }
    }
}

fn stats_text(
    shown: &str,
    location: &CacheLocation,
    stats: &rlm_registry::llm::CacheStats,
) -> String {
    let lookups = stats.hits + stats.misses;
    let rate = if lookups == 0 {
        String::new()
    } else {
        format!(
            " ({:.0}% of lookups)",
            100.0 * stats.hits as f64 / lookups as f64
        )
    };
    let age = |ms: Option<u64>| ms.map_or_else(|| "-".to_string(), ago);
    // A server's store has no file: its size is Redis's to report (INFO memory).
    let store = match location {
        CacheLocation::File(_) => format!("{shown} ({} on disk)", size(stats.file_bytes)),
        CacheLocation::Url(_) => shown.to_string(),
    };
    format!(
        "store    {store}\nentries  {} ({} of answers)\nhits     {}{rate}\nmisses   {}\noldest   {}\nnewest   {}\n",
        stats.entries,
        size(stats.bytes),
        stats.hits,
        stats.misses,
        age(stats.oldest_ms),
        age(stats.newest_ms),
    )
}

/// Bytes as a person reads them: `512 B`, `3.4 KiB`, `1.2 MiB`.
fn size(bytes: u64) -> String {
    match bytes {
        0..1024 => format!("{bytes} B"),
        1024..1_048_576 => format!("{:.1} KiB", bytes as f64 / 1024.0),
        _ => format!("{:.1} MiB", bytes as f64 / 1_048_576.0),
    }
}

/// How long ago a time in milliseconds since the Unix epoch was: `12 s ago`, `3 h ago`.
fn ago(unix_ms: u64) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let seconds = now.saturating_sub(Duration::from_millis(unix_ms)).as_secs();
    match seconds {
        0..120 => format!("{seconds} s ago"),
        120..7200 => format!("{} min ago", seconds / 60),
        7200..172_800 => format!("{} h ago", seconds / 3600),
        _ => format!("{} days ago", seconds / 86_400),
    }
}
