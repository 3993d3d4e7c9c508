//! The Redis store: [`RedisCache`], answers on a Redis server that a fleet of workers
//! shares (`--cache redis://host:port/db`, `rediss://` for TLS, a user and password in
//! the URL).
//!
//! Every key lives under the URL's `?prefix=` (default `rlm:`) followed by the schema
//! version (`v1:`), so that another version's answers, or another team's, are never read:
//! answers under `PREFIX v1:k:<hex key>` (the JSON [`encode_answer`] writes), the hit and
//! miss counters under `…v1:hits` and `…v1:misses`, holds under `…v1:claim:<hex key>`.
//! Redis evicts by its own `maxmemory-policy` (`allkeys-lru` is the one to set): the size
//! cap of `--cache-max-mb` does not apply, and a run given one is told so once.
//!
//! Every call has a short deadline ([`CONNECT_TIMEOUT`], [`RESPONSE_TIMEOUT`]). A server
//! that cannot be reached, refuses the password, or stops answering in time gives one
//! warning and the store stops: the run goes on uncached. An answer that does not read
//! back (garbage under a key) is a miss, and the answer the model then gives replaces it.
//! The password is kept out of everything the store shows: [`CacheStore::location`],
//! `Debug`, warnings and errors.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use ::redis::{Client, Connection, ErrorKind, RedisError, RedisResult};

use super::store::{decode_answer, encode_answer};
use super::{
    CACHE_SCHEMA_VERSION, CacheError, CacheKey, CacheStats, CacheStore, Claim,
    DEFAULT_CACHE_MAX_MB, Lease,
};
use crate::llm::Completion;

/// How long opening a connection to the server may take before the store gives up.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// How long one command may wait for the server's reply before the store gives up.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(1);

/// The prefix of every key when the URL gives none.
const DEFAULT_PREFIX: &str = "rlm:";

/// Takes a hold when no one has it: -1, else how long the holder keeps it (ms). One
/// script, so that no other worker's claim comes between the test and the answer.
const CLAIM_SCRIPT: &str = "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then \
     return -1 else return redis.call('PTTL', KEYS[1]) end";

/// Gives a hold back only if it is still this token's: a lease that ran out leaves the
/// next holder alone.
const RELEASE_SCRIPT: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
     return redis.call('DEL', KEYS[1]) else return 0 end";

/// The [`CacheStore`] on a Redis server: the key is the SHA-256 of the request as sent
/// ([`CacheKey`]) under the URL's prefix and the schema version, the value the answer with
/// its usage. Thread-safe (one connection behind a lock); share it in an `Arc`.
///
/// Opening never fails once the URL reads: a server that cannot be used gives one warning
/// on stderr and a store that answers nothing and stores nothing.
///
/// ```no_run
/// use rlm_registry::llm::{CacheStore, RedisCache};
///
/// let cache = RedisCache::open("redis://:secret@cache.internal:6379/0?prefix=team-a:", 1 << 30)?;
/// assert_eq!(cache.location(), "redis://:***@cache.internal:6379/0?prefix=team-a:");
/// assert!(!format!("{cache:?}").contains("secret"));
/// # Ok::<(), rlm_registry::llm::CacheError>(())
/// ```
pub struct RedisCache {
    /// The URL with the password masked: all the store ever shows of it.
    shown: String,
    /// The password, to mask it in what the server or the client library say.
    secret: Option<String>,
    client: Client,
    /// `PREFIX v1:`: every key this store reads or writes starts with it.
    namespace: String,
    max_bytes: u64,
    /// `None` once the server has failed: the rest of the run goes on uncached.
    connection: Mutex<Option<Connection>>,
    warned: AtomicBool,
    /// Hits and misses not yet added to the server's counters: they go with the next
    /// store, or when the store is dropped, so that a hit costs one round trip.
    pending: Mutex<(i64, i64)>,
}

impl fmt::Debug for RedisCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisCache")
            .field("url", &self.shown)
            .field("namespace", &self.namespace)
            .field("active", &self.is_active())
            .finish()
    }
}

impl RedisCache {
    /// The store `url` names (`redis://` or `rediss://`), for a run: an unreachable or
    /// refusing server warns once and gives a store that is not in use; only a URL that
    /// does not read is an error. A `max_bytes` other than the default's
    /// ([`DEFAULT_CACHE_MAX_MB`]) warns that it does not apply here.
    pub fn open(url: &str, max_bytes: u64) -> Result<RedisCache, CacheError> {
        let cache = RedisCache::unconnected(url, max_bytes)?;
        if max_bytes != DEFAULT_CACHE_MAX_MB.saturating_mul(1 << 20) {
            eprintln!(
                "warning: the call cache {}: a size cap (--cache-max-mb, [cache] max_mb) does not apply to Redis, which evicts by its own maxmemory-policy (set allkeys-lru)",
                cache.shown
            );
        }
        match cache.connect() {
            Ok(connection) => *cache.lock() = Some(connection),
            Err(error) => cache.give_up(&cache.describe(&error)),
        }
        Ok(cache)
    }

    /// The store `url` names, to look at or empty it (`rlm cache stats | clear`): a server
    /// that cannot be reached or refuses the password is an error, and nothing is printed.
    pub fn inspect(url: &str) -> Result<RedisCache, CacheError> {
        let cache = RedisCache::unconnected(url, DEFAULT_CACHE_MAX_MB.saturating_mul(1 << 20))?;
        let connection = cache.connect().map_err(|error| cache.error(&error))?;
        *cache.lock() = Some(connection);
        Ok(cache)
    }

    fn unconnected(url: &str, max_bytes: u64) -> Result<RedisCache, CacheError> {
        let parts = UrlParts::split(url);
        let shown = parts.shown();
        let invalid = |why: &str| CacheError {
            location: shown.clone(),
            message: format!(
                "{why}; give redis://[[USER]:PASSWORD@]HOST[:PORT][/DB][?prefix=PREFIX] (rediss:// for TLS)"
            ),
        };
        if parts.prefix.is_empty() {
            return Err(invalid("an empty prefix"));
        }
        // The library's words ("Invalid database number"), any password in them masked.
        let client = Client::open(parts.for_client.as_str()).map_err(|error| {
            let said = error.to_string();
            invalid(&match &parts.password {
                Some(secret) => said.replace(secret.as_str(), "***"),
                None => said,
            })
        })?;
        Ok(RedisCache {
            namespace: format!("{}v{CACHE_SCHEMA_VERSION}:", parts.prefix),
            secret: parts.password,
            shown,
            client,
            max_bytes,
            connection: Mutex::new(None),
            warned: AtomicBool::new(false),
            pending: Mutex::default(),
        })
    }

    /// A connection with the deadlines set, its password accepted (the client sends it
    /// on connecting).
    fn connect(&self) -> RedisResult<Connection> {
        let mut connection = self.client.get_connection_with_timeout(CONNECT_TIMEOUT)?;
        connection.set_read_timeout(Some(RESPONSE_TIMEOUT))?;
        connection.set_write_timeout(Some(RESPONSE_TIMEOUT))?;
        ::redis::cmd("PING").query::<()>(&mut connection)?;
        Ok(connection)
    }

    /// The prefix and schema version every key of this store starts with (`rlm:v1:`).
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    fn answer_key(&self, key: &CacheKey) -> String {
        format!("{}k:{}", self.namespace, hex(key))
    }

    fn claim_key(&self, key: &CacheKey) -> String {
        format!("{}claim:{}", self.namespace, hex(key))
    }

    fn counter_key(&self, name: &str) -> String {
        format!("{}{name}", self.namespace)
    }

    /// Runs `f` on the connection. A failure of the connection (the server gone, too
    /// slow, refusing) warns once and stops the store; an error the server answered (a
    /// key of another type) is returned and the store goes on.
    fn with_connection<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> RedisResult<T>,
    ) -> Result<T, CacheError> {
        let mut guard = self.lock();
        let Some(connection) = guard.as_mut() else {
            return Err(self.unusable());
        };
        match f(connection) {
            Ok(value) => Ok(value),
            Err(error) if is_server_reply(&error) => Err(self.error(&error)),
            Err(error) => {
                *guard = None;
                drop(guard);
                let message = self.describe(&error);
                self.give_up(&message);
                Err(CacheError {
                    location: self.shown.clone(),
                    message,
                })
            }
        }
    }

    fn give_up(&self, message: &str) {
        if !self.warned.swap(true, Ordering::SeqCst) {
            eprintln!(
                "warning: the call cache {} cannot be used ({message}); going on uncached",
                self.shown
            );
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Connection>> {
        self.connection.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The answer stored for `key`, counting a hit, and a miss when `count_miss`.
    fn find(&self, key: &CacheKey, count_miss: bool) -> Option<Completion> {
        let started = Instant::now();
        let name = self.answer_key(key);
        let found = self.with_connection(|connection| {
            ::redis::cmd("GET")
                .arg(&name)
                .query::<Option<Vec<u8>>>(connection)
        });
        let found = match found {
            Ok(found) => found,
            // Not a string (another program's key of another type): a miss.
            Err(_) if self.is_active() => None,
            Err(_) => return None,
        };
        // Garbage under the key is a miss: asked again, the answer is stored over it.
        let answer = found
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .and_then(|text| decode_answer(&text, started.elapsed()));
        let mut pending = self.pending();
        match answer {
            Some(_) => pending.0 += 1,
            None => pending.1 += i64::from(count_miss),
        }
        answer
    }

    fn pending(&self) -> MutexGuard<'_, (i64, i64)> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The lookups counted in memory, taken to be added to the server's counters.
    fn take_lookups(&self) -> (i64, i64) {
        std::mem::take(&mut *self.pending())
    }

    /// `error` in words, the password masked, with what it means when that is not obvious.
    fn describe(&self, error: &RedisError) -> String {
        let said = if error.is_timeout() {
            format!(
                "no answer within {} ms",
                RESPONSE_TIMEOUT.max(CONNECT_TIMEOUT).as_millis()
            )
        } else if error.is_connection_refusal() {
            format!("cannot connect: {error}")
        } else {
            error.to_string()
        };
        match &self.secret {
            Some(secret) if !secret.is_empty() => said.replace(secret.as_str(), "***"),
            _ => said,
        }
    }

    fn error(&self, error: &RedisError) -> CacheError {
        CacheError {
            location: self.shown.clone(),
            message: self.describe(error),
        }
    }

    fn unusable(&self) -> CacheError {
        CacheError {
            location: self.shown.clone(),
            message: "it failed earlier in this process".to_string(),
        }
    }

    /// Every answer key under the namespace, found with SCAN (which never blocks the
    /// server as KEYS would).
    fn answer_keys(&self, connection: &mut Connection) -> RedisResult<Vec<String>> {
        let pattern = format!("{}k:*", glob_escape(&self.namespace));
        let keys = ::redis::cmd("SCAN")
            .cursor_arg(0)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000)
            .clone()
            .iter::<String>(connection)?
            .collect::<RedisResult<Vec<String>>>()?;
        Ok(keys)
    }
}

impl CacheStore for RedisCache {
    fn location(&self) -> String {
        self.shown.clone()
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
        let name = self.answer_key(key);
        let value = encode_answer(completion);
        let (hits, misses) = self.take_lookups();
        let (hits_key, misses_key) = (self.counter_key("hits"), self.counter_key("misses"));
        // The counters are statistics: a store that fails now only loses them.
        let _ = self.with_connection(|connection| {
            ::redis::pipe()
                .cmd("SET")
                .arg(&name)
                .arg(&value)
                .ignore()
                .cmd("INCRBY")
                .arg(&hits_key)
                .arg(hits)
                .ignore()
                .cmd("INCRBY")
                .arg(&misses_key)
                .arg(misses)
                .ignore()
                .query::<()>(connection)
        });
    }

    fn stats(&self) -> Result<CacheStats, CacheError> {
        let (hits_key, misses_key) = (self.counter_key("hits"), self.counter_key("misses"));
        let (keys, lengths, counters) = self.with_connection(|connection| {
            let keys = self.answer_keys(connection)?;
            let mut lengths = Vec::with_capacity(keys.len());
            for chunk in keys.chunks(1000) {
                let mut pipe = ::redis::pipe();
                for name in chunk {
                    pipe.cmd("STRLEN").arg(name);
                }
                lengths.extend(pipe.query::<Vec<u64>>(connection)?);
            }
            let counters: (Option<i64>, Option<i64>) = ::redis::cmd("MGET")
                .arg(&hits_key)
                .arg(&misses_key)
                .query(connection)?;
            Ok((keys, lengths, counters))
        })?;
        let pending = *self.pending();
        let count = |stored: Option<i64>, here: i64| {
            u64::try_from(stored.unwrap_or(0).saturating_add(here)).unwrap_or(0)
        };
        // Bytes as SQLite's store counts them: the answer and the 32 bytes of its key.
        let bytes = lengths.iter().map(|length| length + 32).sum();
        Ok(CacheStats {
            entries: keys.len() as u64,
            bytes,
            file_bytes: 0,
            hits: count(counters.0, pending.0),
            misses: count(counters.1, pending.1),
            oldest_ms: None,
            newest_ms: None,
        })
    }

    fn clear(&self) -> Result<u64, CacheError> {
        let counters = [self.counter_key("hits"), self.counter_key("misses")];
        let removed = self.with_connection(|connection| {
            let keys = self.answer_keys(connection)?;
            for chunk in keys.chunks(1000) {
                ::redis::cmd("DEL").arg(chunk).query::<()>(connection)?;
            }
            ::redis::cmd("DEL").arg(&counters).query::<()>(connection)?;
            Ok(keys.len() as u64)
        })?;
        *self.pending() = (0, 0);
        Ok(removed)
    }

    fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Nothing: Redis evicts by its own `maxmemory-policy`.
    fn evict(&self, _max_bytes: u64) -> Result<u64, CacheError> {
        Ok(0)
    }

    fn claim(&self, key: &CacheKey, lease: Duration) -> Result<Claim, CacheError> {
        let token = super::sqlite::new_token();
        // PX takes at least 1 ms; a zero lease would be refused.
        let lease_ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX).max(1);
        let name = self.claim_key(key);
        let left: i64 = self.with_connection(|connection| {
            ::redis::cmd("EVAL")
                .arg(CLAIM_SCRIPT)
                .arg(1)
                .arg(&name)
                .arg(token.to_string())
                .arg(lease_ms)
                .query(connection)
        })?;
        if left < 0 {
            return Ok(Claim::Held(Lease {
                key: *key,
                token,
                expires_at: SystemTime::now() + Duration::from_millis(lease_ms),
            }));
        }
        Ok(Claim::Taken {
            expires_in: Duration::from_millis(left.unsigned_abs()),
        })
    }

    fn release(&self, lease: &Lease) -> Result<bool, CacheError> {
        let name = self.claim_key(&lease.key);
        let removed: i64 = self.with_connection(|connection| {
            ::redis::cmd("EVAL")
                .arg(RELEASE_SCRIPT)
                .arg(1)
                .arg(&name)
                .arg(lease.token.to_string())
                .query(connection)
        })?;
        Ok(removed > 0)
    }
}

impl Drop for RedisCache {
    fn drop(&mut self) {
        let (hits, misses) = self.take_lookups();
        if hits == 0 && misses == 0 {
            return;
        }
        let (hits_key, misses_key) = (self.counter_key("hits"), self.counter_key("misses"));
        // The counters are statistics: a server gone now only loses them.
        let _ = self.with_connection(|connection| {
            ::redis::pipe()
                .cmd("INCRBY")
                .arg(&hits_key)
                .arg(hits)
                .ignore()
                .cmd("INCRBY")
                .arg(&misses_key)
                .arg(misses)
                .ignore()
                .query::<()>(connection)
        });
    }
}

/// Whether the server answered with an error about this command (a key of another type,
/// a script refused): the connection is still good, unlike an I/O error, a timeout, a
/// reply that does not parse, or a password refused (`NOAUTH` once the server restarts
/// with one).
fn is_server_reply(error: &RedisError) -> bool {
    let refused = matches!(error.code(), Some("NOAUTH" | "WRONGPASS" | "NOPERM"));
    matches!(
        error.kind(),
        ErrorKind::Server(_) | ErrorKind::Extension | ErrorKind::UnexpectedReturnType
    ) && !refused
        && !error.is_unrecoverable_error()
}

/// What the store makes of a URL: the URL the client library reads (without our
/// `prefix`), what is shown of it (the password masked), the password and the prefix.
struct UrlParts {
    for_client: String,
    shown: String,
    password: Option<String>,
    prefix: String,
}

impl UrlParts {
    fn split(url: &str) -> UrlParts {
        let (before_fragment, fragment) = match url.split_once('#') {
            Some((before, fragment)) => (before, Some(fragment)),
            None => (url, None),
        };
        let (base, query) = match before_fragment.split_once('?') {
            Some((base, query)) => (base, Some(query)),
            None => (before_fragment, None),
        };
        let mut prefix = DEFAULT_PREFIX.to_string();
        let mut kept = Vec::new();
        for pair in query.into_iter().flat_map(|query| query.split('&')) {
            match pair.strip_prefix("prefix=") {
                Some(value) => prefix = value.to_string(),
                None if !pair.is_empty() => kept.push(pair),
                None => {}
            }
        }
        let rejoin = |base: &str, query: &[&str]| {
            let mut url = base.to_string();
            if !query.is_empty() {
                url.push('?');
                url.push_str(&query.join("&"));
            }
            if let Some(fragment) = fragment {
                url.push('#');
                url.push_str(fragment);
            }
            url
        };
        let (masked, password) = mask_password(base);
        let mut shown_query = kept.clone();
        let shown_prefix = format!("prefix={prefix}");
        if query.is_some_and(|query| query.split('&').any(|p| p.starts_with("prefix="))) {
            shown_query.push(&shown_prefix);
        }
        UrlParts {
            for_client: rejoin(base, &kept),
            shown: rejoin(&masked, &shown_query),
            password,
            prefix,
        }
    }

    fn shown(&self) -> String {
        self.shown.clone()
    }
}

/// `scheme://user:***@host…` and the password, when the URL has one: the user info ends
/// at the authority's last `@` (a password's own `@` is written `%40`, but a raw one is
/// masked too).
pub(super) fn mask_password(base: &str) -> (String, Option<String>) {
    let Some((scheme, rest)) = base.split_once("://") else {
        return (base.to_string(), None);
    };
    let Some(at) = rest.rfind('@') else {
        return (base.to_string(), None);
    };
    let (userinfo, host) = (&rest[..at], &rest[at..]);
    match userinfo.split_once(':') {
        Some((user, password)) if !password.is_empty() => (
            format!("{scheme}://{user}:***{host}"),
            Some(password.to_string()),
        ),
        _ => (base.to_string(), None),
    }
}

/// `text` with SCAN's pattern characters escaped, so that a prefix matches only itself.
fn glob_escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// The key's 32 bytes in lowercase hex, as they are named on the server.
fn hex(key: &CacheKey) -> String {
    key.as_bytes().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_urls_password_is_masked_and_its_prefix_taken_out() {
        let parts = UrlParts::split("redis://bob:s3cr%40t@cache:6380/2?prefix=team-a:");
        assert_eq!(parts.shown, "redis://bob:***@cache:6380/2?prefix=team-a:");
        assert_eq!(parts.for_client, "redis://bob:s3cr%40t@cache:6380/2");
        assert_eq!(parts.password.as_deref(), Some("s3cr%40t"));
        assert_eq!(parts.prefix, "team-a:");

        let plain = UrlParts::split("rediss://cache:6380/0?protocol=resp3#insecure");
        assert_eq!(plain.shown, "rediss://cache:6380/0?protocol=resp3#insecure");
        assert_eq!(plain.for_client, plain.shown);
        assert_eq!((plain.password, plain.prefix.as_str()), (None, "rlm:"));

        let no_user = UrlParts::split("redis://:pw@h");
        assert_eq!(no_user.shown, "redis://:***@h");
    }

    #[test]
    fn a_prefix_is_escaped_for_scan() {
        assert_eq!(glob_escape("a*b?[c]\\:"), "a\\*b\\?\\[c\\]\\\\:");
    }

    #[test]
    fn a_url_that_does_not_read_is_an_error_without_its_password() {
        for url in [
            "redis://:hunter2@/0",
            "redis://:hunter2@host:6379/notadb",
            "redis://:hunter2@host/0?prefix=",
        ] {
            let error = RedisCache::open(url, 1 << 20).unwrap_err();
            let text = error.to_string();
            assert!(!text.contains("hunter2"), "{text}");
            assert!(text.contains("redis://:***@"), "{text}");
            assert!(text.contains("redis://"), "{text}");
        }
    }
}
