//! The call cache: answers kept in a SQLite file, so a request sent again (a re-run, an
//! eval resumed in a new directory, the same sub-question asked twice) costs nothing.
//!
//! - [`CallCache`]: the file. The key is the SHA-256 of the request as sent (endpoint,
//!   model, messages, sampling parameters, tools), the value the answer with its usage.
//!   WAL and a busy timeout let several processes share one file; a size cap evicts the
//!   least recently used answers. A file that is corrupt, locked too long or of another
//!   schema version gives one warning and the cache stops: the run goes on uncached, and
//!   never gets a wrong answer or fails because of it.
//! - [`Cached`]: an [`Llm`] that asks the cache first and the model on a miss, storing
//!   what the model answers; a batch sends only its misses.
//!
//! ```
//! use std::sync::Arc;
//! use rlm_registry::llm::{CallCache, Cached, Completion, Llm, LlmError, Request};
//!
//! struct Counting(std::sync::atomic::AtomicUsize);
//! impl Llm for Counting {
//!     fn complete(&self, _: Request) -> Result<Completion, LlmError> {
//!         self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
//!         Ok(Completion::new("4").with_tokens(10, 1))
//!     }
//! }
//!
//! let dir = tempfile::tempdir()?;
//! let cache = Arc::new(CallCache::open(dir.path().join("cache.sqlite")));
//! let model = Arc::new(Counting(Default::default()));
//! let llm = Cached::new(Arc::clone(&model), Arc::clone(&cache));
//! assert!(!llm.complete("2 + 2?".into())?.cached);
//! let again = llm.complete("2 + 2?".into())?;
//! assert!(again.cached && again.content == "4");
//! assert!(!llm.complete(Request::from("2 + 2?").fresh_sample())?.cached);
//! assert_eq!(model.0.load(std::sync::atomic::Ordering::Relaxed), 2);
//! assert_eq!(cache.stats()?.entries, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{Completion, Llm, LlmError, Message, ModelInfo, Request};

/// The size cap of a cache when none is given, in MiB.
pub const DEFAULT_CACHE_MAX_MB: u64 = 1024;

/// The layout of the file this version reads and writes (SQLite's `user_version`). A file
/// of another version is left alone: the run goes on uncached.
pub const CACHE_SCHEMA_VERSION: i64 = 1;

/// How long a call waits for another process holding the file before the cache gives up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS calls (
        key BLOB NOT NULL UNIQUE,
        response TEXT NOT NULL,
        bytes INTEGER NOT NULL,
        created_ms INTEGER NOT NULL,
        used_ms INTEGER NOT NULL
    );
    CREATE INDEX IF NOT EXISTS calls_by_use ON calls (used_ms);
    CREATE TABLE IF NOT EXISTS counters (
        name TEXT PRIMARY KEY,
        value INTEGER NOT NULL
    );
";

/// Why the cache file could not be read or changed ([`CallCache::stats`],
/// [`CallCache::clear`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheError {
    /// The file.
    pub path: PathBuf,
    /// What went wrong, in SQLite's words or ours.
    pub message: String,
}

impl fmt::Display for CacheError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the call cache {}: {}",
            self.path.display(),
            self.message
        )
    }
}

impl std::error::Error for CacheError {}

/// What a cache file holds ([`CallCache::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Answers stored.
    pub entries: u64,
    /// Bytes of the stored answers and their keys: what the size cap counts.
    pub bytes: u64,
    /// The file's size on disk, its write-ahead log included.
    pub file_bytes: u64,
    /// Lookups answered from the file, by every process that used it.
    pub hits: u64,
    /// Lookups that found nothing.
    pub misses: u64,
    /// When the oldest answer was stored, in milliseconds since the Unix epoch.
    pub oldest_ms: Option<u64>,
    /// When the newest answer was stored, in milliseconds since the Unix epoch.
    pub newest_ms: Option<u64>,
}

/// The key of one request: SHA-256 of the request as sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey([u8; 32]);

/// What the key hashes: every field the server sees.
#[derive(Serialize)]
struct KeyedRequest<'a> {
    endpoint: &'a str,
    model: &'a str,
    messages: &'a [Message],
    temperature: Option<f32>,
    max_tokens: Option<u32>,
    tools: &'a [serde_json::Value],
}

impl CacheKey {
    /// The key of `request` sent to `endpoint` for `model` (the request's own model
    /// wins). Tools are part of the key for conversations that send them; plain
    /// completions send none.
    ///
    /// ```
    /// use rlm_registry::llm::{CacheKey, Request};
    ///
    /// let key = |r: Request| CacheKey::of("http://h/v1", "m", &r);
    /// assert_eq!(key("hi".into()), key("hi".into()));
    /// assert_ne!(key("hi".into()), key(Request::from("hi").with_temperature(0.5)));
    /// assert_ne!(key("hi".into()), key(Request::from("hi").with_model("other")));
    /// assert_eq!(key("hi".into()), key(Request::from("hi").fresh_sample()), "not sent");
    /// ```
    pub fn of(endpoint: &str, model: &str, request: &Request) -> CacheKey {
        let keyed = KeyedRequest {
            endpoint,
            model: request.model.as_deref().unwrap_or(model),
            messages: &request.messages,
            temperature: request.temperature,
            max_tokens: request.max_tokens,
            tools: &[],
        };
        // Serializing plain data cannot fail; an empty body would still be a stable key.
        let body = serde_json::to_vec(&keyed).unwrap_or_default();
        CacheKey(Sha256::digest(&body).into())
    }
}

/// An answer as the file keeps it.
#[derive(Serialize, Deserialize)]
struct Stored {
    content: String,
    prompt_tokens: u64,
    completion_tokens: u64,
    model: Option<String>,
    finish_reason: Option<String>,
}

impl Stored {
    fn of(completion: &Completion) -> Stored {
        Stored {
            content: completion.content.clone(),
            prompt_tokens: completion.prompt_tokens,
            completion_tokens: completion.completion_tokens,
            model: completion.model.clone(),
            finish_reason: completion.finish_reason.clone(),
        }
    }

    fn into_completion(self, elapsed: Duration) -> Completion {
        Completion {
            content: self.content,
            prompt_tokens: self.prompt_tokens,
            completion_tokens: self.completion_tokens,
            model: self.model,
            finish_reason: self.finish_reason,
            attempts: 0,
            elapsed,
            cached: true,
        }
    }
}

/// A persistent cache of model answers in one SQLite file: the key is the SHA-256 of the
/// request as sent (endpoint, model, messages, sampling parameters, tools), the value the
/// answer with its usage. Several processes may share the file (WAL, a busy timeout); a
/// size cap evicts the least recently used answers. Thread-safe; share it in an `Arc`.
///
/// Opening never fails: a file that cannot be used gives one warning on stderr and a
/// cache that answers nothing and stores nothing.
pub struct CallCache {
    path: PathBuf,
    max_bytes: u64,
    /// `None` once the file has failed: the rest of the run goes on uncached.
    db: Mutex<Option<Connection>>,
    warned: AtomicBool,
    /// Hits and misses not yet written: they go with the next store, or when the cache
    /// is dropped, so that a hit writes nothing but an answer's time of use.
    pending: Mutex<Lookups>,
}

/// Lookups counted in memory, not yet added to the file's counters.
#[derive(Default)]
struct Lookups {
    hits: i64,
    misses: i64,
}

/// How stale an answer's time of use may get before a hit writes it: the least recently
/// used answers are found to this precision, and a hit within it writes nothing.
const USE_RESOLUTION_MS: i64 = 1000;

impl fmt::Debug for CallCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallCache")
            .field("path", &self.path)
            .field("max_bytes", &self.max_bytes)
            .field("active", &self.is_active())
            .finish()
    }
}

impl CallCache {
    /// The cache in `path` (created if missing), capped at [`DEFAULT_CACHE_MAX_MB`] MiB.
    ///
    /// ```
    /// let dir = tempfile::tempdir()?;
    /// let cache = rlm_registry::llm::CallCache::open(dir.path().join("c.sqlite"));
    /// assert!(cache.is_active());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn open(path: impl Into<PathBuf>) -> CallCache {
        CallCache::with_max_bytes(path, DEFAULT_CACHE_MAX_MB.saturating_mul(1 << 20))
    }

    /// The cache in `path`, keeping at most `max_bytes` of answers and keys: past it, the
    /// least recently used answers go.
    ///
    /// ```
    /// let dir = tempfile::tempdir()?;
    /// let cache = rlm_registry::llm::CallCache::with_max_bytes(dir.path().join("c.sqlite"), 1 << 20);
    /// assert_eq!(cache.max_bytes(), 1 << 20);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn with_max_bytes(path: impl Into<PathBuf>, max_bytes: u64) -> CallCache {
        let path = path.into();
        let cache = CallCache {
            db: Mutex::new(None),
            warned: AtomicBool::new(false),
            pending: Mutex::default(),
            max_bytes,
            path,
        };
        match connect(&cache.path) {
            Ok(connection) => *cache.lock() = Some(connection),
            Err(message) => cache.give_up(&message),
        }
        cache
    }

    /// The cache in an existing `path`, to look at or clear it: unlike
    /// [`CallCache::open`], a missing or unusable file is an error, and nothing is printed.
    ///
    /// ```
    /// use rlm_registry::llm::CallCache;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("c.sqlite");
    /// assert!(CallCache::inspect(&path).is_err(), "no file yet");
    /// drop(CallCache::open(&path));
    /// assert_eq!(CallCache::inspect(&path)?.stats()?.entries, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn inspect(path: impl Into<PathBuf>) -> Result<CallCache, CacheError> {
        let path = path.into();
        let connection = if path.is_file() {
            connect(&path)
        } else {
            Err("no such file".to_string())
        };
        match connection {
            Ok(connection) => Ok(CallCache {
                db: Mutex::new(Some(connection)),
                warned: AtomicBool::new(false),
                pending: Mutex::default(),
                max_bytes: DEFAULT_CACHE_MAX_MB.saturating_mul(1 << 20),
                path,
            }),
            Err(message) => Err(CacheError { path, message }),
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The size cap, in bytes of answers and keys.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Whether the file is in use (false once it failed and the run went on uncached).
    pub fn is_active(&self) -> bool {
        self.lock().is_some()
    }

    /// The answer stored for `key`, marked [`Completion::cached`]; counts a hit or a miss.
    pub fn lookup(&self, key: &CacheKey) -> Option<Completion> {
        let started = Instant::now();
        let found = self.with_db(|db| {
            let row: Option<(i64, String, i64)> = db
                .prepare_cached("SELECT rowid, response, used_ms FROM calls WHERE key = ?1")?
                .query_row([&key.0[..]], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?))
                })
                .optional()?;
            let Some((rowid, response, used_ms)) = row else {
                return Ok(None);
            };
            let now = now_ms();
            if now - used_ms >= USE_RESOLUTION_MS {
                db.prepare_cached("UPDATE calls SET used_ms = ?2 WHERE rowid = ?1")?
                    .execute([rowid, now])?;
            }
            Ok(Some(response))
        })?;
        let mut pending = lock(&self.pending);
        // An answer that does not read back is a miss: asked again, it is stored anew.
        let stored = found.and_then(|found| serde_json::from_str::<Stored>(&found).ok());
        match stored {
            Some(stored) => {
                pending.hits += 1;
                Some(stored.into_completion(started.elapsed()))
            }
            None => {
                pending.misses += 1;
                None
            }
        }
    }

    /// Stores `completion` as the answer to `key`, then evicts the least recently used
    /// answers past the cap.
    pub fn store(&self, key: &CacheKey, completion: &Completion) {
        let Ok(response) = serde_json::to_string(&Stored::of(completion)) else {
            return;
        };
        let bytes = (response.len() + key.0.len()) as i64;
        let max_bytes = i64::try_from(self.max_bytes).unwrap_or(i64::MAX);
        self.with_db(|db| {
            let tx = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let replaced: i64 = tx
                .prepare_cached("SELECT bytes FROM calls WHERE key = ?1")?
                .query_row([&key.0[..]], |row| row.get(0))
                .optional()?
                .unwrap_or(0);
            tx.prepare_cached(
                "INSERT INTO calls (key, response, bytes, created_ms, used_ms)
                 VALUES (?1, ?2, ?3, ?4, ?4)
                 ON CONFLICT (key) DO UPDATE SET response = excluded.response,
                     bytes = excluded.bytes, used_ms = excluded.used_ms",
            )?
            .execute(params![&key.0[..], response, bytes, now_ms()])?;
            add_to_counter(&tx, "bytes", bytes - replaced)?;
            evict(&tx, max_bytes)?;
            self.write_lookups(&tx)?;
            tx.commit()
        });
    }

    /// What the file holds, and the hits and misses of every process that used it.
    ///
    /// ```
    /// let dir = tempfile::tempdir()?;
    /// let cache = rlm_registry::llm::CallCache::open(dir.path().join("c.sqlite"));
    /// let stats = cache.stats()?;
    /// assert_eq!((stats.entries, stats.hits, stats.oldest_ms), (0, 0, None));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stats(&self) -> Result<CacheStats, CacheError> {
        let guard = self.lock();
        let db = guard.as_ref().ok_or_else(|| self.unusable())?;
        let mut stats = db
            .query_row(
                "SELECT COUNT(*), COALESCE(SUM(bytes), 0), MIN(created_ms), MAX(created_ms)
                 FROM calls",
                [],
                |row| {
                    Ok(CacheStats {
                        entries: unsigned(row.get(0)?),
                        bytes: unsigned(row.get(1)?),
                        oldest_ms: row.get::<_, Option<i64>>(2)?.map(unsigned),
                        newest_ms: row.get::<_, Option<i64>>(3)?.map(unsigned),
                        ..CacheStats::default()
                    })
                },
            )
            .map_err(|e| self.error(e))?;
        let read = |name: &str| counter(db, name).map(unsigned).map_err(|e| self.error(e));
        let pending = lock(&self.pending);
        stats.hits = read("hits")? + unsigned(pending.hits);
        stats.misses = read("misses")? + unsigned(pending.misses);
        drop(pending);
        stats.file_bytes = ["", "-wal"]
            .iter()
            .filter_map(|suffix| {
                let mut name = self.path.clone().into_os_string();
                name.push(suffix);
                std::fs::metadata(name).ok()
            })
            .map(|meta| meta.len())
            .sum();
        Ok(stats)
    }

    /// Removes every answer and resets the counters; returns how many answers there were.
    ///
    /// ```
    /// let dir = tempfile::tempdir()?;
    /// let cache = rlm_registry::llm::CallCache::open(dir.path().join("c.sqlite"));
    /// assert_eq!(cache.clear()?, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn clear(&self) -> Result<u64, CacheError> {
        let mut guard = self.lock();
        let db = guard.as_mut().ok_or_else(|| self.unusable())?;
        let cleared = (|| {
            let tx = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let removed = tx.execute("DELETE FROM calls", [])?;
            tx.execute("DELETE FROM counters", [])?;
            tx.commit()?;
            *lock(&self.pending) = Lookups::default();
            // Give the pages back to the file system; a reader elsewhere only delays it.
            let _ = db.execute_batch("VACUUM; PRAGMA wal_checkpoint(TRUNCATE);");
            Ok(removed as u64)
        })();
        cleared.map_err(|e: rusqlite::Error| self.error(e))
    }

    /// Adds the lookups counted in memory to the file's counters.
    fn write_lookups(&self, db: &Connection) -> rusqlite::Result<()> {
        let mut pending = lock(&self.pending);
        add_to_counter(db, "hits", pending.hits)?;
        add_to_counter(db, "misses", pending.misses)?;
        *pending = Lookups::default();
        Ok(())
    }

    /// Runs `f` on the open file; on a failure, warns once and stops using it.
    fn with_db<T>(&self, f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>) -> Option<T> {
        let mut guard = self.lock();
        let result = f(guard.as_mut()?);
        match result {
            Ok(value) => Some(value),
            Err(error) => {
                *guard = None;
                drop(guard);
                self.give_up(&describe(&error));
                None
            }
        }
    }

    fn give_up(&self, message: &str) {
        if !self.warned.swap(true, Ordering::SeqCst) {
            eprintln!(
                "warning: the call cache {} cannot be used ({message}); going on uncached",
                self.path.display()
            );
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Connection>> {
        lock(&self.db)
    }

    fn error(&self, error: rusqlite::Error) -> CacheError {
        CacheError {
            path: self.path.clone(),
            message: describe(&error),
        }
    }

    fn unusable(&self) -> CacheError {
        let reason = match connect(&self.path) {
            Err(message) => message,
            Ok(_) => "it failed earlier in this process".to_string(),
        };
        CacheError {
            path: self.path.clone(),
            message: reason,
        }
    }
}

impl Drop for CallCache {
    fn drop(&mut self) {
        // The counters are statistics: a file that fails now only loses them.
        let _ = self.with_db(|db| self.write_lookups(db));
    }
}

/// Locks, ignoring poisoning: a panic elsewhere cannot leave a connection half-changed
/// (SQLite rolls back) nor the counts inconsistent.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Opens `path` for the cache: WAL, the busy timeout, the schema checked or created.
fn connect(path: &Path) -> Result<Connection, String> {
    let setup = || -> rusqlite::Result<Result<Connection, String>> {
        let db = Connection::open(path)?;
        db.busy_timeout(BUSY_TIMEOUT)?;
        // Several processes at once: readers do not block the writer. NORMAL syncs at
        // checkpoints only; a power cut may lose the last answers, never corrupt older.
        db.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))?;
        db.execute_batch("PRAGMA synchronous = NORMAL")?;
        let version: i64 = db.query_row("PRAGMA user_version", [], |row| row.get(0))?;
        match version {
            0 => db.execute_batch(&format!(
                "BEGIN IMMEDIATE; {SCHEMA} PRAGMA user_version = {CACHE_SCHEMA_VERSION}; COMMIT;"
            ))?,
            CACHE_SCHEMA_VERSION => {}
            other => {
                return Ok(Err(format!(
                    "schema version {other}, this version reads {CACHE_SCHEMA_VERSION}"
                )));
            }
        }
        // A file whose tables are not ours fails here rather than at the first call.
        db.query_row("SELECT COUNT(*) FROM calls WHERE key = x''", [], |_| Ok(()))?;
        Ok(Ok(db))
    };
    setup().map_err(|e| describe(&e))?
}

/// Deletes the least recently used answers until the rest fit in `max_bytes`. The total
/// is kept in the `bytes` counter, so a store costs the same at any size of the file.
fn evict(tx: &rusqlite::Transaction<'_>, max_bytes: i64) -> rusqlite::Result<()> {
    let mut total = counter(tx, "bytes")?;
    while total > max_bytes {
        let oldest: Vec<(i64, i64)> = tx
            .prepare_cached("SELECT rowid, bytes FROM calls ORDER BY used_ms, rowid LIMIT 64")?
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        if oldest.is_empty() {
            total = 0;
            break;
        }
        for (rowid, bytes) in oldest {
            if total <= max_bytes {
                break;
            }
            tx.execute("DELETE FROM calls WHERE rowid = ?1", [rowid])?;
            total -= bytes;
        }
    }
    set_counter(tx, "bytes", total)
}

/// A counter of the file (`hits`, `misses`, `bytes`), 0 before it is first set.
fn counter(db: &Connection, name: &str) -> rusqlite::Result<i64> {
    db.prepare_cached("SELECT value FROM counters WHERE name = ?1")?
        .query_row([name], |row| row.get(0))
        .optional()
        .map(Option::unwrap_or_default)
}

fn set_counter(db: &Connection, name: &str, value: i64) -> rusqlite::Result<()> {
    db.prepare_cached(
        "INSERT INTO counters (name, value) VALUES (?1, ?2)
         ON CONFLICT (name) DO UPDATE SET value = excluded.value",
    )?
    .execute(params![name, value])
    .map(drop)
}

fn add_to_counter(db: &Connection, name: &str, delta: i64) -> rusqlite::Result<()> {
    db.prepare_cached(
        "INSERT INTO counters (name, value) VALUES (?1, ?2)
         ON CONFLICT (name) DO UPDATE SET value = value + excluded.value",
    )?
    .execute(params![name, delta])
    .map(drop)
}

/// SQLite's error in words, with what it means for the cache when that is not obvious.
fn describe(error: &rusqlite::Error) -> String {
    match error.sqlite_error_code() {
        Some(rusqlite::ErrorCode::NotADatabase) => "not a cache file (not SQLite)".to_string(),
        Some(rusqlite::ErrorCode::DatabaseCorrupt) => format!("the file is corrupt: {error}"),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
            format!(
                "locked by another process for more than {} s",
                BUSY_TIMEOUT.as_secs()
            )
        }
        _ => error.to_string(),
    }
}

/// Milliseconds since the Unix epoch, as SQLite stores integers.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A count or time read back from SQLite (stored non-negative).
fn unsigned(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// An [`Llm`] that answers from a [`CallCache`] when it can and asks `inner` otherwise,
/// storing each new answer. The key names the server and model `inner` reports
/// ([`Llm::model_info`]; empty for a fake that reports none). A request marked
/// [`Request::fresh`] always goes to `inner`; a batch sends only its misses.
pub struct Cached<L> {
    inner: L,
    cache: Arc<CallCache>,
    endpoint: String,
    model: String,
}

impl<L: Llm> Cached<L> {
    /// `inner` behind `cache`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use rlm_registry::llm::{CallCache, Cached, LlmClient, LlmConfig};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let client = LlmClient::new(LlmConfig::new("http://127.0.0.1:8080/v1", "m"))?;
    /// let cache = Arc::new(CallCache::open(dir.path().join("cache.sqlite")));
    /// let cached = Cached::new(client, Arc::clone(&cache));
    /// assert!(Arc::ptr_eq(cached.cache(), &cache));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(inner: L, cache: Arc<CallCache>) -> Cached<L> {
        let ModelInfo { model, base_url } = inner.model_info().unwrap_or(ModelInfo {
            model: String::new(),
            base_url: String::new(),
        });
        Cached {
            inner,
            cache,
            endpoint: base_url,
            model,
        }
    }

    /// The cache it reads and writes.
    pub fn cache(&self) -> &Arc<CallCache> {
        &self.cache
    }

    fn key(&self, request: &Request) -> CacheKey {
        CacheKey::of(&self.endpoint, &self.model, request)
    }

    /// The stored answer, unless the request asks for a fresh one.
    fn lookup(&self, request: &Request, key: &CacheKey) -> Option<Completion> {
        (!request.fresh).then(|| self.cache.lookup(key)).flatten()
    }

    fn remember(&self, key: &CacheKey, result: &Result<Completion, LlmError>) {
        if let Ok(completion) = result {
            self.cache.store(key, completion);
        }
    }
}

impl<L: Llm> Llm for Cached<L> {
    fn complete(&self, request: Request) -> Result<Completion, LlmError> {
        let key = self.key(&request);
        if let Some(hit) = self.lookup(&request, &key) {
            return Ok(hit);
        }
        let result = self.inner.complete(request);
        self.remember(&key, &result);
        result
    }

    fn complete_batch(&self, requests: Vec<Request>) -> Vec<Result<Completion, LlmError>> {
        let mut answers: Vec<Option<Result<Completion, LlmError>>> = Vec::new();
        let mut missed = Vec::new();
        for request in requests {
            let key = self.key(&request);
            let hit = self.lookup(&request, &key);
            if hit.is_none() {
                missed.push((answers.len(), key, request));
            }
            answers.push(hit.map(Ok));
        }
        let (slots, sent): (Vec<_>, Vec<_>) = missed
            .into_iter()
            .map(|(slot, key, request)| ((slot, key), request))
            .unzip();
        let mut results = self.inner.complete_batch(sent).into_iter();
        for (slot, key) in slots {
            let result = results.next().unwrap_or_else(|| {
                Err(LlmError::Config(
                    "the model returned fewer answers than prompts".to_string(),
                ))
            });
            self.remember(&key, &result);
            answers[slot] = Some(result);
        }
        answers.into_iter().flatten().collect()
    }

    fn model_info(&self) -> Option<ModelInfo> {
        self.inner.model_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn completion(text: &str) -> Completion {
        Completion::new(text).with_tokens(5, 2)
    }

    #[test]
    fn a_stored_answer_comes_back_marked_cached() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CallCache::open(dir.path().join("c.sqlite"));
        let key = CacheKey::of("e", "m", &Request::from("q"));
        assert_eq!(cache.lookup(&key), None);
        cache.store(&key, &completion("a"));
        let hit = cache.lookup(&key).unwrap();
        assert!(hit.cached);
        assert_eq!((hit.content.as_str(), hit.total_tokens()), ("a", 7));
        let stats = cache.stats().unwrap();
        assert_eq!((stats.entries, stats.hits, stats.misses), (1, 1, 1));
    }

    #[test]
    fn eviction_keeps_the_most_recently_used_within_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let key = |i: usize| CacheKey::of("e", "m", &Request::from(format!("q{i}")));
        let one = serde_json::to_string(&Stored::of(&completion("answer")))
            .unwrap()
            .len() as u64
            + 32;
        let cache = CallCache::with_max_bytes(dir.path().join("c.sqlite"), 3 * one);
        for i in 0..3 {
            cache.store(&key(i), &completion("answer"));
            std::thread::sleep(Duration::from_millis(2));
        }
        // Using the first (once its time of use is older than the resolution) makes the
        // second the least recently used.
        std::thread::sleep(Duration::from_millis(USE_RESOLUTION_MS as u64 + 10));
        assert!(cache.lookup(&key(0)).is_some());
        cache.store(&key(3), &completion("answer"));
        let stats = cache.stats().unwrap();
        assert_eq!(stats.entries, 3);
        assert!(stats.bytes <= 3 * one);
        assert!(
            cache.lookup(&key(1)).is_none(),
            "the least recently used went"
        );
        for kept in [0, 2, 3] {
            assert!(cache.lookup(&key(kept)).is_some(), "{kept} kept");
        }
    }

    #[test]
    fn another_schema_version_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sqlite");
        Connection::open(&path)
            .unwrap()
            .execute_batch("PRAGMA user_version = 7")
            .unwrap();
        let cache = CallCache::open(&path);
        assert!(!cache.is_active());
        assert!(cache.lookup(&CacheKey::of("e", "m", &"q".into())).is_none());
        let error = cache.stats().unwrap_err();
        assert!(error.message.contains("schema version 7"), "{error}");
    }

    #[test]
    fn a_file_that_is_not_sqlite_is_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sqlite");
        std::fs::write(&path, b"not a database, just some text that is long enough").unwrap();
        let cache = CallCache::open(&path);
        assert!(!cache.is_active());
        cache.store(&CacheKey::of("e", "m", &"q".into()), &completion("a"));
        assert_eq!(
            std::fs::read(&path).unwrap(),
            b"not a database, just some text that is long enough"
        );
    }
}
