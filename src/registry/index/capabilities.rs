//! Automatic capability tags from a function's name and description: the 16 capabilities
//! of a tool registry (file_io, http, database, …), each recognised by keywords compared
//! after stemming, so "charts", "charting" and "chart" all give `visualization`.

use std::collections::HashSet;
use std::sync::OnceLock;

use super::tokenize::Tokenizer;

/// Every automatic capability and the words that signal it.
pub const RULES: &[(&str, &[&str])] = &[
    (
        "file_io",
        &[
            "file",
            "filesystem",
            "directory",
            "folder",
            "disk",
            "path",
            "filename",
        ],
    ),
    (
        "http",
        &[
            "http", "https", "url", "api", "rest", "fetch", "endpoint", "webhook", "download",
        ],
    ),
    (
        "database",
        &[
            "database",
            "db",
            "sql",
            "sqlite",
            "postgres",
            "postgresql",
            "mysql",
            "mongodb",
            "redis",
        ],
    ),
    (
        "notification",
        &[
            "notify",
            "notification",
            "alert",
            "slack",
            "email",
            "sms",
            "pager",
        ],
    ),
    (
        "shell",
        &[
            "shell",
            "bash",
            "command",
            "terminal",
            "exec",
            "subprocess",
            "cli",
        ],
    ),
    (
        "search",
        &[
            "search",
            "find",
            "lookup",
            "grep",
            "locate",
            "match",
            "occurrence",
        ],
    ),
    (
        "transform",
        &[
            "transform",
            "convert",
            "format",
            "parse",
            "split",
            "join",
            "replace",
            "normalize",
            "trim",
            "upper",
            "lower",
            "encode",
            "decode",
            "chunk",
            "truncate",
            "extract",
        ],
    ),
    (
        "validate",
        &[
            "validate",
            "validation",
            "check",
            "lint",
            "verify",
            "assert",
        ],
    ),
    (
        "generate",
        &[
            "generate",
            "create",
            "produce",
            "compose",
            "draft",
            "render",
            "synthesize",
        ],
    ),
    (
        "analyze",
        &[
            "analyze",
            "analyse",
            "analysis",
            "count",
            "statistic",
            "stats",
            "measure",
            "frequency",
            "summarize",
            "review",
            "relevant",
        ],
    ),
    (
        "web_search",
        &["google", "bing", "tavily", "duckduckgo", "websearch"],
    ),
    (
        "code",
        &[
            "code", "script", "compile", "snippet", "refactor", "program",
        ],
    ),
    (
        "git",
        &["git", "commit", "branch", "diff", "repository", "repo"],
    ),
    (
        "kubernetes",
        &["kubernetes", "k8s", "kubectl", "kube", "pod", "helm"],
    ),
    (
        "aws",
        &[
            "aws",
            "s3",
            "ec2",
            "dynamodb",
            "amazon",
            "cloudwatch",
            "sqs",
            "sns",
        ],
    ),
    (
        "visualization",
        &[
            "chart",
            "graph",
            "plot",
            "visualize",
            "visualization",
            "diagram",
            "histogram",
            "dashboard",
        ],
    ),
];

/// The 16 capability names, in [`RULES`] order.
pub fn all() -> impl Iterator<Item = &'static str> {
    RULES.iter().map(|(name, _)| *name)
}

fn stemmed_rules() -> &'static Vec<(&'static str, Vec<String>)> {
    static STEMMED: OnceLock<Vec<(&'static str, Vec<String>)>> = OnceLock::new();
    STEMMED.get_or_init(|| {
        let tokenizer = Tokenizer::new();
        RULES
            .iter()
            .map(|(name, words)| (*name, words.iter().map(|w| tokenizer.stem(w)).collect()))
            .collect()
    })
}

/// The automatic capabilities of a function named `name` described by `description`, in
/// [`RULES`] order.
///
/// ```
/// use rlm_registry::search::capabilities::automatic;
/// assert_eq!(automatic("plot_histogram", "Draws a chart of values."), ["visualization"]);
/// assert_eq!(automatic("web_lookup", "Searches the web."), ["search", "web_search"]);
/// ```
pub fn automatic(name: &str, description: &str) -> Vec<&'static str> {
    let tokenizer = Tokenizer::new();
    let mut stems = HashSet::new();
    tokenizer.for_each_term(name, |_, stem| {
        stems.insert(stem);
    });
    tokenizer.for_each_term(description, |_, stem| {
        stems.insert(stem);
    });
    let web = stems.contains("web") || stems.contains("internet") || stems.contains("onlin");
    let searching = stems.contains("search") || stems.contains("brows") || stems.contains("lookup");
    stemmed_rules()
        .iter()
        .filter(|(name, words)| {
            words.iter().any(|w| stems.contains(w)) || (*name == "web_search" && web && searching)
        })
        .map(|(name, _)| *name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn there_are_sixteen() {
        assert_eq!(all().count(), 16);
    }

    #[test]
    fn keywords_detect_capabilities() {
        assert_eq!(
            automatic("read_file", "Reads a file from disk."),
            ["file_io"]
        );
        assert_eq!(automatic("http_get", "Fetches a URL."), ["http"]);
        assert_eq!(
            automatic("slack_send", "Sends an alert to Slack."),
            ["notification"]
        );
        assert_eq!(automatic("kubectl_apply", "Applies pods."), ["kubernetes"]);
        assert_eq!(automatic("s3_put", "Uploads to AWS S3."), ["aws"]);
        assert_eq!(automatic("git_log", "Shows commits."), ["git"]);
        assert!(automatic("nothing", "Does something.").is_empty());
    }
}
