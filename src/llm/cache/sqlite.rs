//! The SQLite store: [`CallCache`], answers in one file that several processes share.
//!
//! WAL and a busy timeout let several processes use the file at once; a size cap evicts
//! the least recently used answers (a hit writes its time of use only when it is more than
//! a second old, and hits and misses are counted in memory until the next store, so that
//! a hit costs a read). A file that is corrupt, locked too long or of another schema
//! version gives one warning and the store stops: the run goes on uncached. Holds on keys
//! ([`CacheStore::claim`]) are rows of a `claims` table with an expiry, made the first
//! time one is taken, so files without one are read as before.

use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::store::{decode_answer, encode_answer};
use super::{CacheError, CacheKey, CacheStats, CacheStore, Claim, DEFAULT_CACHE_MAX_MB, Lease};
use crate::llm::Completion;

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

/// The holds on keys: made by the first claim, so that a file written before claims
/// existed (or by a version that never claims) keeps its layout and version.
const CLAIMS_SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS claims (
        key BLOB PRIMARY KEY,
        token INTEGER NOT NULL,
        expires_ms INTEGER NOT NULL
    );
";

/// The [`CacheStore`] in one SQLite file: the key is the SHA-256 of the request as sent
/// ([`CacheKey`]), the value the answer with its usage. Several processes may share the
/// file (WAL, a busy timeout); a size cap evicts the least recently used answers.
/// Thread-safe; share it in an `Arc`.
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
    /// use rlm_registry::llm::{CacheStore, CallCache};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let cache = CallCache::open(dir.path().join("c.sqlite"));
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
    /// use rlm_registry::llm::{CacheStore, CallCache};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let cache = CallCache::with_max_bytes(dir.path().join("c.sqlite"), 1 << 20);
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
    /// use rlm_registry::llm::{CacheStore, CallCache};
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
            Err(message) => Err(CacheError {
                location: path.display().to_string(),
                message,
            }),
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The answer stored for `key`, counting a hit, and a miss when `count_miss`.
    fn find(&self, key: &CacheKey, count_miss: bool) -> Option<Completion> {
        let started = Instant::now();
        let found = self.with_db(|db| {
            let row: Option<(i64, String, i64)> = db
                .prepare_cached("SELECT rowid, response, used_ms FROM calls WHERE key = ?1")?
                .query_row([&key.as_bytes()[..]], |row| {
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
        let stored = found.and_then(|found| decode_answer(&found, started.elapsed()));
        match stored {
            Some(stored) => {
                pending.hits += 1;
                Some(stored)
            }
            None => {
                pending.misses += i64::from(count_miss);
                None
            }
        }
    }

    /// Adds the lookups counted in memory to the file's counters.
    fn write_lookups(&self, db: &Connection) -> rusqlite::Result<()> {
        let mut pending = lock(&self.pending);
        add_to_counter(db, "hits", pending.hits)?;
        add_to_counter(db, "misses", pending.misses)?;
        *pending = Lookups::default();
        Ok(())
    }

    /// Runs `f` in a write transaction on the open file, committed if it succeeds; a
    /// failure is returned, not a reason to stop using the file (only looking and tidying
    /// up run here, never a run's lookups and stores).
    fn write<T>(
        &self,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> rusqlite::Result<T>,
    ) -> Result<T, CacheError> {
        let mut guard = self.lock();
        let db = guard.as_mut().ok_or_else(|| self.unusable())?;
        let done = (|| {
            let tx = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let value = f(&tx)?;
            tx.commit()?;
            Ok(value)
        })();
        done.map_err(|e: rusqlite::Error| self.error(e))
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
            location: self.location(),
            message: describe(&error),
        }
    }

    fn unusable(&self) -> CacheError {
        let reason = match connect(&self.path) {
            Err(message) => message,
            Ok(_) => "it failed earlier in this process".to_string(),
        };
        CacheError {
            location: self.location(),
            message: reason,
        }
    }
}

impl CacheStore for CallCache {
    fn location(&self) -> String {
        self.path.display().to_string()
    }

    fn is_active(&self) -> bool {
        self.lock().is_some()
    }

    fn lookup(&self, key: &CacheKey) -> Option<Completion> {
        self.find(key, true)
    }

    fn lookup_again(&self, key: &CacheKey) -> Option<Completion> {
        self.find(key, false)
    }

    fn store(&self, key: &CacheKey, completion: &Completion) {
        let response = encode_answer(completion);
        let bytes = (response.len() + key.as_bytes().len()) as i64;
        let max_bytes = i64::try_from(self.max_bytes).unwrap_or(i64::MAX);
        self.with_db(|db| {
            let tx = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let replaced: i64 = tx
                .prepare_cached("SELECT bytes FROM calls WHERE key = ?1")?
                .query_row([&key.as_bytes()[..]], |row| row.get(0))
                .optional()?
                .unwrap_or(0);
            tx.prepare_cached(
                "INSERT INTO calls (key, response, bytes, created_ms, used_ms)
                 VALUES (?1, ?2, ?3, ?4, ?4)
                 ON CONFLICT (key) DO UPDATE SET response = excluded.response,
                     bytes = excluded.bytes, used_ms = excluded.used_ms",
            )?
            .execute(params![&key.as_bytes()[..], response, bytes, now_ms()])?;
            add_to_counter(&tx, "bytes", bytes - replaced)?;
            evict(&tx, max_bytes)?;
            self.write_lookups(&tx)?;
            tx.commit()
        });
    }

    fn stats(&self) -> Result<CacheStats, CacheError> {
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

    fn clear(&self) -> Result<u64, CacheError> {
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

    fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    fn evict(&self, max_bytes: u64) -> Result<u64, CacheError> {
        let max_bytes = i64::try_from(max_bytes).unwrap_or(i64::MAX);
        self.write(|tx| evict(tx, max_bytes))
    }

    fn claim(&self, key: &CacheKey, lease: Duration) -> Result<Claim, CacheError> {
        let token = new_token();
        let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
        self.write(|tx| {
            tx.execute_batch(CLAIMS_SCHEMA)?;
            let now = now_ms();
            let held: Option<i64> = tx
                .prepare_cached("SELECT expires_ms FROM claims WHERE key = ?1")?
                .query_row([&key.as_bytes()[..]], |row| row.get(0))
                .optional()?;
            if let Some(expires_ms) = held.filter(|&expires_ms| expires_ms > now) {
                return Ok(Claim::Taken {
                    expires_in: Duration::from_millis(unsigned(expires_ms - now)),
                });
            }
            let expires_ms = now.saturating_add(lease_ms);
            tx.prepare_cached(
                "INSERT INTO claims (key, token, expires_ms) VALUES (?1, ?2, ?3)
                 ON CONFLICT (key) DO UPDATE SET token = excluded.token,
                     expires_ms = excluded.expires_ms",
            )?
            .execute(params![&key.as_bytes()[..], as_sql(token), expires_ms])?;
            Ok(Claim::Held(Lease {
                key: *key,
                token,
                expires_at: UNIX_EPOCH + Duration::from_millis(unsigned(expires_ms)),
            }))
        })
    }

    fn release(&self, lease: &Lease) -> Result<bool, CacheError> {
        self.write(|tx| {
            tx.execute_batch(CLAIMS_SCHEMA)?;
            let removed = tx
                .prepare_cached("DELETE FROM claims WHERE key = ?1 AND token = ?2")?
                .execute(params![&lease.key.as_bytes()[..], as_sql(lease.token)])?;
            Ok(removed > 0)
        })
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
    // Workers opening a new file at once: switching it to WAL takes the file to itself,
    // and SQLite says "busy" at once there rather than wait, so the setup is tried again
    // for as long as the busy timeout.
    let started = Instant::now();
    loop {
        match setup() {
            Err(error) if is_busy(&error) && started.elapsed() < BUSY_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(10));
            }
            done => return done.map_err(|e| describe(&e))?,
        }
    }
}

/// Whether `error` is another connection holding the file (busy or locked).
fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// Deletes the least recently used answers until the rest fit in `max_bytes`; returns how
/// many went. The total
/// is kept in the `bytes` counter, so a store costs the same at any size of the file.
fn evict(tx: &rusqlite::Transaction<'_>, max_bytes: i64) -> rusqlite::Result<u64> {
    let mut total = counter(tx, "bytes")?;
    let mut removed = 0;
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
            removed += 1;
        }
    }
    set_counter(tx, "bytes", total)?;
    Ok(removed)
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

/// A token no other claim has: random per process (the hasher's keys), distinct within it.
pub(super) fn new_token() -> u64 {
    static CLAIMS: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(CLAIMS.fetch_add(1, Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    hasher.write_i64(now_ms());
    hasher.finish()
}

/// A token as SQLite stores it: the same 64 bits, signed.
fn as_sql(token: u64) -> i64 {
    i64::from_ne_bytes(token.to_ne_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Request;

    fn completion(text: &str) -> Completion {
        Completion::new(text).with_tokens(5, 2)
    }

    #[test]
    fn several_workers_opening_a_new_file_at_once_all_use_it() {
        for round in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("c.sqlite");
            let start = std::sync::Barrier::new(8);
            std::thread::scope(|scope| {
                let opened: Vec<_> = (0..8)
                    .map(|_| {
                        scope.spawn(|| {
                            start.wait();
                            CallCache::open(&path).is_active()
                        })
                    })
                    .collect();
                for worker in opened {
                    assert!(
                        worker.join().unwrap(),
                        "round {round}: a worker went uncached"
                    );
                }
            });
        }
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
        let one = encode_answer(&completion("answer")).len() as u64 + 32;
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

    #[test]
    fn evict_removes_the_least_recently_used_down_to_a_size() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CallCache::open(dir.path().join("c.sqlite"));
        let key = |i: usize| CacheKey::of("e", "m", &Request::from(format!("q{i}")));
        for i in 0..3 {
            cache.store(&key(i), &completion("answer"));
            std::thread::sleep(Duration::from_millis(2));
        }
        let one = encode_answer(&completion("answer")).len() as u64 + 32;
        assert_eq!(cache.evict(2 * one).unwrap(), 1);
        assert!(cache.lookup(&key(0)).is_none(), "the oldest went");
        assert_eq!(cache.stats().unwrap().bytes, 2 * one);
        assert_eq!(cache.evict(0).unwrap(), 2);
        assert_eq!(cache.stats().unwrap().entries, 0);
    }

    #[test]
    fn a_claim_holds_a_key_against_other_workers_until_released() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sqlite");
        // Two workers: two stores on one file.
        let (one, other) = (CallCache::open(&path), CallCache::open(&path));
        let key = CacheKey::of("e", "m", &"q".into());
        let lease = Duration::from_secs(60);
        let Claim::Held(held) = one.claim(&key, lease).unwrap() else {
            panic!("the first claim holds the key");
        };
        assert_eq!(held.key, key);
        let Claim::Taken { expires_in } = other.claim(&key, lease).unwrap() else {
            panic!("a second claim finds it taken");
        };
        assert!(expires_in <= lease && expires_in > Duration::from_secs(50));
        assert!(
            matches!(one.claim(&key, lease), Ok(Claim::Taken { .. })),
            "even by its holder"
        );
        let elsewhere = CacheKey::of("e", "m", &"another question".into());
        assert!(matches!(other.claim(&elsewhere, lease), Ok(Claim::Held(_))));

        assert!(one.release(&held).unwrap());
        assert!(!one.release(&held).unwrap(), "released once");
        let Claim::Held(again) = other.claim(&key, lease).unwrap() else {
            panic!("released, the key can be held again");
        };
        assert_ne!(again.token, held.token);
        assert!(
            !one.release(&held).unwrap(),
            "an old lease leaves the new hold alone"
        );
        assert!(matches!(one.claim(&key, lease), Ok(Claim::Taken { .. })));
        assert!(other.release(&again).unwrap());
    }

    #[test]
    fn a_lease_that_runs_out_frees_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CallCache::open(dir.path().join("c.sqlite"));
        let key = CacheKey::of("e", "m", &"q".into());
        let Claim::Held(lapsed) = cache.claim(&key, Duration::from_millis(30)).unwrap() else {
            panic!("held");
        };
        std::thread::sleep(Duration::from_millis(60));
        // Its holder died: a new worker takes the key over.
        let Claim::Held(taken_over) = cache.claim(&key, Duration::from_secs(60)).unwrap() else {
            panic!("a lapsed lease does not hold the key");
        };
        assert!(!cache.release(&lapsed).unwrap());
        assert!(matches!(
            cache.claim(&key, Duration::from_secs(60)),
            Ok(Claim::Taken { .. })
        ));
        assert!(cache.release(&taken_over).unwrap());
    }

    #[test]
    fn claims_leave_a_file_without_them_as_it_was_until_one_is_taken() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sqlite");
        let cache = CallCache::open(&path);
        cache.store(&CacheKey::of("e", "m", &"q".into()), &completion("a"));
        let tables = || -> Vec<String> {
            let db = Connection::open(&path).unwrap();
            let mut names = db
                .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
                .unwrap();
            names
                .query_map([], |row| row.get(0))
                .unwrap()
                .map(Result::unwrap)
                .collect()
        };
        assert_eq!(tables(), ["calls", "counters"]);
        let _ = cache.claim(&CacheKey::of("e", "m", &"q".into()), Duration::from_secs(1));
        assert_eq!(tables(), ["calls", "claims", "counters"]);
    }

    #[test]
    fn an_unusable_store_refuses_claims() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sqlite");
        std::fs::write(&path, b"not a database, just some text that is long enough").unwrap();
        let cache = CallCache::open(&path);
        let error = cache
            .claim(&CacheKey::of("e", "m", &"q".into()), Duration::from_secs(1))
            .unwrap_err();
        assert!(error.message.contains("not a cache file"), "{error}");
    }
}
