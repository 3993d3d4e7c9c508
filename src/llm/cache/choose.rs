//! Which store `--cache` names: [`open_cache`] and [`inspect_cache`] read a path or a URL
//! and open the store it names, from the one table of stores below.

use std::sync::Arc;

use super::redis::mask_password;
use super::{CacheError, CacheStore, CallCache, RedisCache};

/// A store, opened or why not.
type Opened = Result<Arc<dyn CacheStore>, CacheError>;

/// A kind of store: the URL scheme that names it, and how it is opened.
struct StoreKind {
    /// `sqlite` for `sqlite://…`.
    scheme: &'static str,
    /// The form a user writes, for the message that lists them.
    form: &'static str,
    /// For a run: never fails on a store that does not work (it warns and goes on
    /// uncached), only on a name it cannot read.
    open: fn(&str, u64) -> Opened,
    /// For `rlm cache`: an existing store, or why not.
    inspect: fn(&str) -> Opened,
}

/// Every store, the first the one a plain path names. A new store is a row here.
const STORES: &[StoreKind] = &[
    StoreKind {
        scheme: "sqlite",
        form: "sqlite://PATH",
        open: |path, max_bytes| Ok(Arc::new(CallCache::with_max_bytes(path, max_bytes))),
        inspect: |path| Ok(Arc::new(CallCache::inspect(path)?)),
    },
    StoreKind {
        scheme: "redis",
        form: "redis://HOST[:PORT][/DB]",
        open: |rest, max_bytes| {
            Ok(Arc::new(RedisCache::open(
                &format!("redis://{rest}"),
                max_bytes,
            )?))
        },
        inspect: |rest| Ok(Arc::new(RedisCache::inspect(&format!("redis://{rest}"))?)),
    },
    StoreKind {
        scheme: "rediss",
        form: "rediss://HOST[:PORT][/DB]",
        open: |rest, max_bytes| {
            Ok(Arc::new(RedisCache::open(
                &format!("rediss://{rest}"),
                max_bytes,
            )?))
        },
        inspect: |rest| Ok(Arc::new(RedisCache::inspect(&format!("rediss://{rest}"))?)),
    },
];

/// The store `name` names, for a run, keeping at most `max_bytes` of answers: a file path
/// is a SQLite file, as is `sqlite://PATH`; `redis://…` and `rediss://…` a Redis server
/// ([`RedisCache`], which leaves eviction to Redis); another URL scheme is an error that
/// lists the forms this version takes. A store that names something that cannot be used (a file
/// that is not SQLite) is no error: it warns once and the run goes on uncached.
///
/// ```
/// use rlm_registry::llm::{CacheStore, open_cache};
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("answers.sqlite");
/// let store = open_cache(path.to_str().unwrap(), 64 << 20)?;
/// assert!(store.is_active() && path.is_file());
/// assert_eq!(store.max_bytes(), 64 << 20);
/// let url = format!("sqlite://{}", path.display());
/// assert_eq!(open_cache(&url, 1 << 20)?.location(), path.display().to_string());
///
/// let error = open_cache("memcached://:secret@cache.internal:11211", 1 << 20).unwrap_err();
/// assert!(!error.to_string().contains("secret"), "{error}");
/// assert!(error.to_string().contains("a file path or sqlite://PATH"), "{error}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn open_cache(name: &str, max_bytes: u64) -> Result<Arc<dyn CacheStore>, CacheError> {
    let (kind, rest) = choose(name)?;
    (kind.open)(rest, max_bytes)
}

/// The existing store `name` names, to look at or empty it (`rlm cache stats | clear`):
/// unlike [`open_cache`], one that is missing or cannot be used is an error, and nothing
/// is printed.
///
/// ```
/// use rlm_registry::llm::{CacheStore, inspect_cache, open_cache};
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("answers.sqlite");
/// let name = path.to_str().unwrap();
/// assert!(inspect_cache(name).is_err(), "no file yet");
/// drop(open_cache(name, 1 << 20)?);
/// assert_eq!(inspect_cache(name)?.stats()?.entries, 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn inspect_cache(name: &str) -> Result<Arc<dyn CacheStore>, CacheError> {
    let (kind, rest) = choose(name)?;
    (kind.inspect)(rest)
}

/// The kind of store `name` names and what follows its scheme (the whole name for a path).
fn choose(name: &str) -> Result<(&'static StoreKind, &str), CacheError> {
    // A URL of a scheme this version lacks may still carry a password.
    let error = |message: String| CacheError {
        location: mask_password(name).0,
        message,
    };
    let Some((scheme, rest)) = url_scheme(name) else {
        return match name {
            "" => Err(error(format!("names no store; give {}", forms()))),
            path => Ok((&STORES[0], path)),
        };
    };
    let Some(kind) = STORES
        .iter()
        .find(|kind| kind.scheme.eq_ignore_ascii_case(scheme))
    else {
        return Err(error(format!(
            "this version has no `{scheme}://` store; give {}",
            forms()
        )));
    };
    if rest.is_empty() {
        return Err(error(format!(
            "names no store after `{scheme}://`; give {}",
            forms()
        )));
    }
    Ok((kind, rest))
}

/// `(scheme, rest)` when `name` is a URL (`scheme://rest`, the scheme a letter then
/// letters, digits, `+`, `-` or `.`); a path otherwise, whatever it holds.
fn url_scheme(name: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = name.split_once("://")?;
    let mut chars = scheme.chars();
    let starts = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    let valid = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    (starts && valid).then_some((scheme, rest))
}

/// "a file path or sqlite://PATH": every form the table takes.
fn forms() -> String {
    let urls: Vec<&str> = STORES.iter().map(|kind| kind.form).collect();
    format!("a file path or {}", urls.join(" or "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_or_a_sqlite_url_names_a_sqlite_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sqlite");
        let plain = path.to_str().unwrap().to_string();
        for name in [
            plain.clone(),
            format!("sqlite://{plain}"),
            format!("SQLite://{plain}"),
        ] {
            let store = open_cache(&name, 1 << 20).unwrap();
            assert_eq!(store.location(), plain, "{name}");
            assert_eq!(store.max_bytes(), 1 << 20);
            assert!(store.is_active());
        }
        // A relative path after the scheme stays relative.
        assert_eq!(
            choose("sqlite://cache/c.sqlite").unwrap().1,
            "cache/c.sqlite"
        );
        assert_eq!(choose("./odd://name").unwrap().1, "./odd://name", "a path");
    }

    #[test]
    fn a_store_this_version_lacks_is_a_clear_error() {
        for (name, says) in [
            (
                "memcached://localhost:11211",
                "this version has no `memcached://` store",
            ),
            ("sqlite://", "names no store after `sqlite://`"),
            ("", "names no store"),
        ] {
            let error = open_cache(name, 1 << 20).unwrap_err();
            assert_eq!(error.location, name);
            let text = error.to_string();
            assert!(text.contains(says), "{text}");
            assert!(
                text.ends_with(
                    "give a file path or sqlite://PATH or redis://HOST[:PORT][/DB] or rediss://HOST[:PORT][/DB]"
                ),
                "the forms it takes: {text}"
            );
            assert_eq!(inspect_cache(name).unwrap_err(), error);
        }
    }
}
