//! The built-ins, declared once: each one's name, provider, scope and
//! documentation (in the same LuaLS form as a registry function) in [`BUILTINS`], and a
//! [`BuiltinId`] naming it in code. Everything else is derived from this table: the names
//! a registry function may not take (rule E008), the built-in providers and their scopes,
//! what `help` prints and the prompt declares, and the environment's implementations,
//! installed by an exhaustive `match` on [`BuiltinId`] — so a built-in without an
//! implementation, or an implementation without a doc, does not compile.
//!
//! The first function of a built-in table (`re.find`, `json.decode`, `csv.parse`) opens
//! its doc with one sentence introducing the whole table: compact listings show that
//! sentence once, above the table's signatures
//! (`Catalog::host_prompt_compact`, in the runtime).
//!
//! This module is plain data (no Lua, no runtime), so `build.rs` and registry-only
//! builds have it too.
//!
//! ```
//! use rlm_registry::conventions::builtins::{self, BuiltinId, Scope};
//!
//! let print = builtins::get("print").unwrap();
//! assert_eq!(print.id, BuiltinId::Print);
//! assert_eq!(print.scope, Scope::Core);
//! assert_eq!(builtins::get("re.find").unwrap().global(), "re");
//! assert!(builtins::is_global("rlm_query"));
//! ```

/// Who may call a function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Every agent.
    Core,
    /// Agents that may still start a child (`rlm_query*`): not at the depth limit.
    Agent,
    /// The top-level agent only (`ask_user`, `notify_user`): it talks to the human.
    User,
}

impl Scope {
    /// The scope's name: `core`, `agent` or `user`.
    ///
    /// ```
    /// use rlm_registry::conventions::builtins::Scope;
    /// assert_eq!(Scope::User.name(), "user");
    /// assert_eq!("agent".parse::<Scope>(), Ok(Scope::Agent));
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Scope::Core => "core",
            Scope::Agent => "agent",
            Scope::User => "user",
        }
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Scope {
    type Err = String;

    fn from_str(s: &str) -> Result<Scope, String> {
        match s {
            "core" => Ok(Scope::Core),
            "agent" => Ok(Scope::Agent),
            "user" => Ok(Scope::User),
            other => Err(format!(
                "unknown scope `{other}`: expected core, agent or user"
            )),
        }
    }
}

/// The provider a built-in belongs to. The order of the variants is the order the
/// providers are listed in (the prompt, `rlm providers`, `GET /v1/providers`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BuiltinProvider {
    /// Output, the final answer, tokens, the session's variables and discovery (of
    /// functions with `fn_search`, of a corpus's documents with `doc_search`).
    Core,
    /// Regular expressions (`re.*`).
    Re,
    /// JSON (`json.*`).
    Json,
    /// CSV (`csv.*`).
    Csv,
    /// Sub-model calls.
    Llm,
    /// Child agents.
    Agent,
    /// The human user.
    User,
    /// The Rust primitives behind the Lua library (`_text_primitives.*`): internal, called
    /// by registry functions, never offered to the model (not in [`BuiltinProvider::ALL`]).
    Primitives,
}

impl BuiltinProvider {
    /// Every built-in provider offered to the model, in listing order: all but
    /// [`BuiltinProvider::Primitives`].
    pub const ALL: [BuiltinProvider; 7] = [
        BuiltinProvider::Core,
        BuiltinProvider::Re,
        BuiltinProvider::Json,
        BuiltinProvider::Csv,
        BuiltinProvider::Llm,
        BuiltinProvider::Agent,
        BuiltinProvider::User,
    ];

    /// The provider's name: `core`, `re`, `json`, `csv`, `llm`, `agent` or `user`.
    pub fn name(self) -> &'static str {
        match self {
            BuiltinProvider::Core => "core",
            BuiltinProvider::Re => "re",
            BuiltinProvider::Json => "json",
            BuiltinProvider::Csv => "csv",
            BuiltinProvider::Llm => "llm",
            BuiltinProvider::Agent => "agent",
            BuiltinProvider::User => "user",
            BuiltinProvider::Primitives => "primitives",
        }
    }

    /// One line saying what the provider offers.
    pub fn description(self) -> &'static str {
        match self {
            BuiltinProvider::Core => {
                "Output, the final answer, tokens, the session's variables and discovery: every agent has them."
            }
            BuiltinProvider::Re => {
                "Regular expressions in Python/PCRE syntax on the regex crate: linear time, byte offsets as string.sub takes them."
            }
            BuiltinProvider::Json => {
                "JSON on serde_json: decode to Lua values, encode them back, iterate over JSON lines."
            }
            BuiltinProvider::Csv => {
                "CSV (RFC 4180) on the csv crate: parse to tables, iterate over rows, encode rows."
            }
            BuiltinProvider::Llm => "Sub-model calls on pieces of the context.",
            BuiltinProvider::Agent => {
                "Child agents with a REPL of their own; only where a child may still be started."
            }
            BuiltinProvider::User => "The human user as a function; top-level agent only.",
            BuiltinProvider::Primitives => {
                "The Rust primitives the Lua library calls (internal: call the library's functions instead)."
            }
        }
    }

    /// Its functions, in table order.
    pub fn functions(self) -> impl Iterator<Item = &'static Builtin> {
        BUILTINS.iter().filter(move |b| b.provider == self)
    }
}

/// One built-in: a row of [`BUILTINS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Builtin {
    /// How code names it.
    pub id: BuiltinId,
    /// The name the model calls it by: a global (`print`) or a field of a built-in table
    /// (`re.find`).
    pub name: &'static str,
    /// The provider it belongs to.
    pub provider: BuiltinProvider,
    /// Who may call it.
    pub scope: Scope,
    /// The doc comment and a stub declaration, as the model reads them.
    pub doc: &'static str,
}

impl Builtin {
    /// The global it lives under: its name, or the table before the dot (`re`).
    pub fn global(&self) -> &'static str {
        self.name
            .split_once('.')
            .map_or(self.name, |(table, _)| table)
    }

    /// The field of that global's table, for a name like `re.find`.
    pub fn field(&self) -> Option<&'static str> {
        self.name.split_once('.').map(|(_, field)| field)
    }

    /// The doc comment without its stub declaration line.
    pub fn doc_comment(&self) -> &'static str {
        match self.doc.rfind("\nfunction ") {
            Some(end) => &self.doc[..end],
            None => self.doc,
        }
    }
}

impl BuiltinId {
    /// Its row of [`BUILTINS`].
    pub fn builtin(self) -> &'static Builtin {
        &BUILTINS[self as usize]
    }

    /// The name the model calls it by.
    pub fn name(self) -> &'static str {
        self.builtin().name
    }
}

/// Declares [`BuiltinId`] and [`BUILTINS`] from one list, so the two cannot disagree:
/// the row of a variant is at its discriminant.
macro_rules! builtins {
    ($($id:ident => $name:literal, $provider:ident, $scope:ident, $doc:expr;)*) => {
        /// A built-in, as code names it: the environment installs each by an
        /// exhaustive `match` on this enum.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum BuiltinId {
            $(
                #[doc = concat!("`", $name, "`")]
                $id,
            )*
        }

        /// Every built-in, grouped by provider in listing order.
        pub const BUILTINS: &[Builtin] = &[
            $(
                Builtin {
                    id: BuiltinId::$id,
                    name: $name,
                    provider: BuiltinProvider::$provider,
                    scope: Scope::$scope,
                    doc: $doc,
                },
            )*
        ];
    };
}

builtins! {
    Print => "print", Core, Core,
        "--- Prints its arguments (tab-separated) to the execution's output, which is what you get back.\n---@param ... any Values to print\nfunction print(...) end";
    Final => "FINAL", Core, Core,
        "--- Gives the final answer and ends the run.\n---@param value any The answer: a string, number or boolean as tostring writes it, a table as its JSON (as json.encode writes it; a function inside is an error); with an answer schema, its JSON, checked against the schema\nfunction FINAL(value) end";
    FinalVar => "FINAL_VAR", Core, Core,
        "--- Gives the value of a global variable as the final answer and ends the run.\n---@param name string The variable's name, e.g. FINAL_VAR(\"answer\")\nfunction FINAL_VAR(name) end";
    TokenCount => "token_count", Core, Core,
        "--- Counts the tokens of a text exactly (o200k_base).\n---@param text string The text\n---@return integer count The number of tokens\nfunction token_count(text) end";
    TokenTruncate => "token_truncate", Core, Core,
        "--- Returns the longest prefix of a text with at most n tokens.\n---@param text string The text\n---@param n integer The most tokens to keep\n---@return string prefix The truncated text\nfunction token_truncate(text, n) end";
    TokenSplit => "token_split", Core, Core,
        "--- Splits a text into pieces of at most n tokens; consecutive pieces share `overlap` tokens.\n---@param text string The text\n---@param n integer The most tokens per piece\n---@param overlap? integer Tokens shared by consecutive pieces (default 0, less than n)\n---@return string[] pieces The pieces, in order\nfunction token_split(text, n, overlap) end";
    TokenBudget => "token_budget", Core, Core,
        "--- Returns how many tokens the session may still spend on sub-model calls (math.huge if unlimited).\n---@return number remaining The remaining tokens\nfunction token_budget() end";
    Budget => "budget", Core, Core,
        "--- Returns what is left of the run's budgets. Its fields, each nil if unlimited: tokens, calls, seconds, cost (US dollars), iterations (your turns after this one); and depth, max_depth (yours, and the deepest a child may go).\n---@return table left The budgets left\nfunction budget() end";
    StoreList => "store_list", Core, Core,
        "--- Lists the globals your code has set, with the name, type, size and a short preview of each. These are this session's variables, not the keys saved with the store provider's store_set.\n---@return table[] variables One table per variable, sorted by name\nfunction store_list() end";
    StoreSummarize => "store_summarize", Core, Core,
        "--- Describes one of this session's variables (see store_list): its type, size and a longer preview.\n---@param name string The variable's name\n---@return string summary The description\nfunction store_summarize(name) end";
    FnSearch => "fn_search", Core, Core,
        "--- Searches the functions for a task, best match first. Each result has name, signature, summary and confidence (0..1); then call help(name) for the full documentation.\n---@param query string What you want to do, in words, or a function name\n---@param opts? table Options: max_results (default 5), capability (e.g. \"search\", \"transform\"), source (a registry directory), mode: \"fast\" (BM25, the default), \"balanced\" (an LLM reranks; counts as 1 llm_query call) or \"accurate\" (an LLM also expands the query; 2 calls). The LLM modes need an LLM (an error without one) and fall back to the fast order when the model fails\n---@return table[] results The matches, best first\n---@return table info mode; fallback: why the fast order was used (nil if not); expanded_terms: the phrases the LLM added\nfunction fn_search(query, opts) end";
    Help => "help", Core, Core,
        "--- Returns the documentation of a built-in or registry function; with no name, lists every name.\n---@param name? string The function's name\n---@return string doc The documentation\nfunction help(name) end";
    DocSearch => "doc_search", Core, Core,
        "--- Ranks a corpus's documents for a query (BM25), best first.\n--- Words match by their stems (\"caching\" finds \"cache\"); rare words weigh more. The index is built on the first call and kept. Read a hit's text as context[hit.doc].text.\n---@param query string The words to look for\n---@param k? integer How many documents at most (default 10)\n---@param corpus? table Another list of documents or strings to search (default: context)\n---@return table[] hits {doc = <index in the corpus>, name = <its name>, score = <BM25 score>}, best first; documents without a query word are left out\nfunction doc_search(query, k, corpus) end";
    ReFind => "re.find", Re, Core,
        "--- Regular expressions (`re.*`): Python/PCRE-style syntax (\\d \\w \\s \\b, [a-z], (a|b), x{2,5}, (?P<name>...), lazy *?), linear time, no backreferences or look-around. Write patterns in [[long brackets]] to keep backslashes. Offsets are 1-based bytes, like string.find/string.sub. `flags` is a string of: i (ignore case), m (^ and $ at each line), s (. matches newline), x (verbose), U (lazy by default); (?i) inline works too.\n--- Finds the first match: its start and end, then its groups (nil for a group that did not take part).\n---@param text string The text\n---@param pattern string The regular expression\n---@param init? integer Where to start (default 1; negative counts from the end)\n---@param flags? string Flags, e.g. \"i\"\n---@return integer|nil start Start of the match, nil if none\n---@return integer|nil end End of the match (inclusive)\n---@return string ... The groups\nfunction re.find(text, pattern, init, flags) end";
    ReMatch => "re.match", Re, Core,
        "--- Like string.match with a regular expression: the groups of the first match, or the whole match if the pattern has none; nil if no match. Not anchored: start the pattern with ^ for that.\n---@param text string The text\n---@param pattern string The regular expression\n---@param init? integer Where to start (default 1)\n---@param flags? string Flags, e.g. \"i\"\n---@return string|nil ... The groups, or the whole match\nfunction re.match(text, pattern, init, flags) end";
    ReGmatch => "re.gmatch", Re, Core,
        "--- Iterates over the matches, like string.gmatch: each step gives the groups, or the whole match if the pattern has none.\n--- for key, value in re.gmatch(text, [[(\\w+)=(\\d+)]]) do ... end\n---@param text string The text\n---@param pattern string The regular expression\n---@param flags? string Flags, e.g. \"i\"\n---@return function iterator The iterator\nfunction re.gmatch(text, pattern, flags) end";
    ReFindAll => "re.find_all", Re, Core,
        "--- Every non-overlapping match, like Python's re.findall: the whole matches if the pattern has no group, the group if it has one, a table of groups (false for one that did not take part) otherwise.\n---@param text string The text\n---@param pattern string The regular expression\n---@param flags? string Flags, e.g. \"i\"\n---@return table matches The matches, in order\nfunction re.find_all(text, pattern, flags) end";
    ReCount => "re.count", Re, Core,
        "--- Counts the non-overlapping matches.\n---@param text string The text\n---@param pattern string The regular expression\n---@param flags? string Flags, e.g. \"i\"\n---@return integer count The number of matches\nfunction re.count(text, pattern, flags) end";
    ReSplit => "re.split", Re, Core,
        "--- Splits a text at every match of the pattern (the matches are dropped).\n---@param text string The text\n---@param pattern string The separator, a regular expression\n---@param max? integer At most this many splits (default: all)\n---@param flags? string Flags, e.g. \"i\"\n---@return string[] pieces The pieces, in order (empty ones included)\nfunction re.split(text, pattern, max, flags) end";
    ReGsub => "re.gsub", Re, Core,
        "--- Replaces matches, like string.gsub: `replacement` is a string where $0 is the match, $1 or ${1} a group, ${name} a named group and $$ a dollar sign; or a function called with the groups (or the match) whose string result replaces it (nil or false keeps it); or a table indexed by the first group (or the match). re.replace is the same function.\n---@param text string The text\n---@param pattern string The regular expression\n---@param replacement string|function|table What to put in place of each match\n---@param max? integer At most this many replacements (default: all)\n---@param flags? string Flags, e.g. \"i\"\n---@return string result The new text\n---@return integer count The number of replacements\nfunction re.gsub(text, pattern, replacement, max, flags) end";
    ReReplace => "re.replace", Re, Core,
        "--- The same function as re.gsub: replaces matches, $1 / ${name} in a string replacement.\n---@param text string The text\n---@param pattern string The regular expression\n---@param replacement string|function|table What to put in place of each match\n---@param max? integer At most this many replacements (default: all)\n---@param flags? string Flags, e.g. \"i\"\n---@return string result The new text\n---@return integer count The number of replacements\nfunction re.replace(text, pattern, replacement, max, flags) end";
    JsonDecode => "json.decode", Json, Core,
        "--- JSON (`json.*`): an object becomes a table with string keys, an array a sequence (encoded back as an array, empty or not), an integer an integer, null `json.null`. Nesting deeper than 100 is an error.\n--- Decodes a JSON text; an error names its line and column.\n---@param text string The JSON text\n---@return any value The value\nfunction json.decode(text) end";
    JsonEncode => "json.encode", Json, Core,
        "--- Encodes a value as JSON: a table with keys 1..n is an array, one with string keys an object, {} is {} (json.array() is []). Objects' keys come out sorted. NaN, inf, cycles, functions and other keys are errors naming where.\n---@param value any The value\n---@param opts? table indent (spaces per level; default compact)\n---@return string text The JSON text\nfunction json.encode(value, opts) end";
    JsonLines => "json.lines", Json, Core,
        "--- Iterates over a JSON-lines text, one decoded value per non-blank line: for rec in json.lines(context) do ... end\n---@param text string The JSON-lines text\n---@return function iterator The iterator\nfunction json.lines(text) end";
    JsonArray => "json.array", Json, Core,
        "--- Marks a table (default: a new empty one) as a JSON array, so json.encode writes [] when it is empty.\n---@param t? table The table\n---@return table t The same table\nfunction json.array(t) end";
    CsvParse => "csv.parse", Csv, Core,
        "--- CSV (`csv.*`, RFC 4180: quoted fields may hold separators, quotes, newlines). Fields are strings (use tonumber). opts: sep (one character, default \",\"), header (default true: the first row names the columns).\n--- Parses a CSV text: with a header each row is keyed by column name (a missing field is absent, an extra one kept under its column number), without one an array of strings.\n---@param text string The CSV text\n---@param opts? table sep, header\n---@return table[] rows The rows, in order\n---@return string[]|nil header The column names (nil without a header)\nfunction csv.parse(text, opts) end";
    CsvRows => "csv.rows", Csv, Core,
        "--- Iterates over the rows of a CSV text, each as csv.parse gives it: for row in csv.rows(context) do ... end\n---@param text string The CSV text\n---@param opts? table sep, header\n---@return function iterator The iterator\nfunction csv.rows(text, opts) end";
    CsvEncode => "csv.encode", Csv, Core,
        "--- Writes rows as CSV, quoted as RFC 4180 requires, lines ending in \\n. Rows are arrays, or tables keyed by column name: then a header line (unless header = false) and the columns of opts.columns (default: the sorted keys).\n---@param rows table[] The rows\n---@param opts? table sep, header, columns (string[])\n---@return string text The CSV text\nfunction csv.encode(rows, opts) end";
    LlmQuery => "llm_query", Llm, Core,
        "--- Asks a sub-model one question and returns its answer. Use it on pieces of the context.\n---@param prompt string The whole prompt, including any text to read\n---@param opts? table cache = false: a fresh answer, not one the call cache kept; images: a list of images sent with the prompt to a vision model, each an image document of the context (context[i] with kind \"image\") or {mime = \"image/png\", data = <bytes>}; at most 16, each at most 20 MiB (png, jpeg, gif, webp)\n---@return string answer The model's answer\nfunction llm_query(prompt, opts) end";
    LlmQueryBatched => "llm_query_batched", Llm, Core,
        "--- Asks a sub-model several questions concurrently; much faster than calling llm_query in a loop.\n--- A failed call gives \"error: ...\" in its place.\n---@param prompts string[] The prompts\n---@param opts? table cache = false: fresh answers, not ones the call cache kept; images: images sent with every prompt, as for llm_query\n---@return string[] answers The answers, in the same order\nfunction llm_query_batched(prompts, opts) end";
    Parallel => "parallel", Llm, Core,
        "--- Runs the functions as coroutines; their llm_query/rlm_query calls go out together. Code between calls needs no change; limits hold across all.\n---@param ... function The functions, called without arguments\n---@return table results Each function's first result, in order (nil where it failed)\n---@return table errors The message of each function that failed, at its position\nfunction parallel(...) end";
    ParallelMap => "parallel_map", Llm, Core,
        "--- Like parallel, for fn(item, i) over a list, at most opts.concurrency at once. Example: results, errors = parallel_map(chunks, function(c) return llm_query(\"Summarize: \" .. c) end)\n---@param list any[] The items\n---@param fn function Called as fn(item, i); may call llm_query and rlm_query\n---@param opts? table concurrency: how many run at once (default: the client's)\n---@return any[] results One result per item, in order (nil where it failed)\n---@return table errors The message of each item that failed, at its position\nfunction parallel_map(list, fn, opts) end";
    RlmQuery => "rlm_query", Agent, Agent,
        "--- Hands a sub-task to a child agent with a REPL of its own, one level deeper; returns its final answer. The child can read its own `context` and call functions.\n--- With opts.schema, a JSON Schema as a Lua table (e.g. {type = \"object\", properties = {n = {type = \"integer\"}}, required = {\"n\"}}), the child's answer must match it and comes back as a Lua value: rlm_query(prompt, {schema = s}) or rlm_query(prompt, context, {schema = s}).\n--- Where the host runs no child agents, it is a plain llm_query (no schema then).\n---@param prompt string The sub-task\n---@param context? string The child's `context` (default: none)\n---@param opts? table schema: the JSON Schema the child's answer must match; images: images its model sees with the sub-task, as for llm_query\n---@return any answer The child's final answer: a string, or with a schema the value it describes (a table for an object or an array)\nfunction rlm_query(prompt, context, opts) end";
    RlmQueryBatched => "rlm_query_batched", Agent, Agent,
        "--- Runs several child agents concurrently, like rlm_query for each prompt; a failed child gives \"error: ...\".\n--- With opts.schema, every child's answer must match it: rlm_query_batched(prompts, contexts, {schema = s}), or rlm_query_batched(prompts, {schema = s}) without contexts.\n---@param prompts string[] The sub-tasks\n---@param contexts? string[] One context per prompt\n---@param opts? table schema: the JSON Schema every child's answer must match; images: images every child's model sees with its sub-task, as for llm_query\n---@return any[] answers The answers, in order\nfunction rlm_query_batched(prompts, contexts, opts) end";
    AskUser => "ask_user", User, User,
        "--- Asks the human user a question and waits for the answer. Slow: batch your questions, and ask only what you cannot find out yourself.\n---@param question string The question\n---@return string answer The user's answer\nfunction ask_user(question) end";
    NotifyUser => "notify_user", User, User,
        "--- Tells the human user something (progress, a finding) without waiting for an answer.\n---@param message string The message\nfunction notify_user(message) end";
    LineCount => "_text_primitives.line_count", Primitives, Core,
        "--- The number of lines of a text, as `line_count` counts them.\n---@param text string The text\n---@return integer count The number of lines\nfunction _text_primitives.line_count(text) end";
    Lines => "_text_primitives.lines", Primitives, Core,
        "--- The lines of a text, without their terminators, as `lines` cuts them.\n---@param text string The text\n---@return string[] lines The lines\nfunction _text_primitives.lines(text) end";
    JoinLines => "_text_primitives.join_lines", Primitives, Core,
        "--- Lines first..last of a text, joined by \"\\n\".\n---@param text string The text\n---@param first integer The first line (1-based)\n---@param last integer The last line\n---@return string lines The lines, joined\nfunction _text_primitives.join_lines(text, first, last) end";
    WordCount => "_text_primitives.word_count", Primitives, Core,
        "--- The number of whitespace-separated words of a text.\n---@param text string The text\n---@return integer count The number of words\nfunction _text_primitives.word_count(text) end";
    FindAll => "_text_primitives.find_all", Primitives, Core,
        "--- The 1-based start of every non-overlapping occurrence of a plain string.\n---@param text string The text\n---@param needle string The string to find\n---@return integer[] starts The starts, in order\nfunction _text_primitives.find_all(text, needle) end";
    FindAllRegex => "_text_primitives.find_all_regex", Primitives, Core,
        "--- The 1-based start of every non-overlapping match of a regular expression.\n---@param text string The text\n---@param pattern string The regular expression\n---@return integer[] starts The starts, in order\nfunction _text_primitives.find_all_regex(text, pattern) end";
    Grep => "_text_primitives.grep", Primitives, Core,
        "--- The lines matching a plain string, Lua pattern or regular expression, with context lines, as `grep` gives them.\n---@param text string|table The text, or a corpus: a list of documents or of strings\n---@param pattern string What to match\n---@param context integer Lines of context around each match\n---@param mode string \"plain\", \"pattern\" or \"regex\"\n---@return table[] matches The matches, in order (with `doc` and `name` over a corpus)\nfunction _text_primitives.grep(text, pattern, context, mode) end";
    ChunkByLines => "_text_primitives.chunk_by_lines", Primitives, Core,
        "--- Chunks of n lines, consecutive chunks sharing `overlap` lines.\n---@param text string The text\n---@param n integer Lines per chunk\n---@param overlap integer Lines shared by consecutive chunks (less than n)\n---@return string[] chunks The chunks, in order\nfunction _text_primitives.chunk_by_lines(text, n, overlap) end";
    ChunkBySeparator => "_text_primitives.chunk_by_separator", Primitives, Core,
        "--- Pieces between separators, merged up to a size.\n---@param text string The text\n---@param separator string The separator\n---@param max_size? integer The most bytes per chunk\n---@return string[] chunks The chunks, in order\nfunction _text_primitives.chunk_by_separator(text, separator, max_size) end";
    ChunkBySize => "_text_primitives.chunk_by_size", Primitives, Core,
        "--- Chunks of at most `size` bytes, never cutting a UTF-8 character, sharing `overlap` bytes.\n---@param text string The text\n---@param size integer The most bytes per chunk\n---@param overlap integer Bytes shared by consecutive chunks\n---@return string[] chunks The chunks, in order\nfunction _text_primitives.chunk_by_size(text, size, overlap) end";
    DocList => "_text_primitives.doc_list", Primitives, Core,
        "--- The documents of a corpus as `{doc, name, text}` tables, as `doc_list` gives them.\n---@param corpus table A list of documents or of strings\n---@return table[] documents One table per document, in order\nfunction _text_primitives.doc_list(corpus) end";
    SortBy => "_text_primitives.sort_by", Primitives, Core,
        "--- A list sorted by a key (a field name or a function), stable; nil, nil, false when the list needs the Lua path.\n---@param list table The list\n---@param key any The key\n---@param reverse boolean Descending order\n---@return table|nil sorted The sorted list\nfunction _text_primitives.sort_by(list, key, reverse) end";
    Count => "_text_primitives.count", Primitives, Core,
        "--- Counts of the values of a list, or of a key of each; nil, nil, false when the list needs the Lua path.\n---@param list table The list\n---@param key? any The key\n---@return table|nil counts Value to count\nfunction _text_primitives.count(list, key) end";
    GroupBy => "_text_primitives.group_by", Primitives, Core,
        "--- The items of a list grouped by a key; nil, nil, false when the list needs the Lua path.\n---@param list table The list\n---@param key any The key\n---@return table|nil groups Key to items\nfunction _text_primitives.group_by(list, key) end";
    MostCommon => "_text_primitives.most_common", Primitives, Core,
        "--- The n most common entries of a table of counts, most common first.\n---@param counts table Value to count\n---@param n? integer How many (default: all)\n---@return table|nil top {value, count} pairs\nfunction _text_primitives.most_common(counts, n) end";
}

/// A value a built-in table holds besides its functions (`json.null`): declared here,
/// next to the functions, so that the environment installs it in its provider's
/// read-only table (only where that provider's functions are; [`BuiltinValueId`] is
/// matched exhaustively there), `help(name)` shows its doc, `rlm meta` declares it as a
/// `---@field` of that table's class, and its global is reserved with the functions'.
/// The functions' table stays functions only, so the providers, the prompt, the tool
/// exports and the JSON views need no second kind of built-in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuiltinValue {
    /// How code names it: the environment makes each by an exhaustive `match`.
    pub id: BuiltinValueId,
    /// `table.field`, like a dotted built-in's name.
    pub name: &'static str,
    /// The provider whose table holds it; it exists where that provider's functions do.
    pub provider: BuiltinProvider,
    /// Its LuaLS type, for `rlm meta`.
    pub lua_type: &'static str,
    /// One line saying what it is.
    pub doc: &'static str,
}

impl BuiltinValue {
    /// The table it lives in (`json`) and its field there (`null`).
    ///
    /// ```
    /// use rlm_registry::conventions::builtins::BUILTIN_VALUES;
    /// assert_eq!(BUILTIN_VALUES[0].table_and_field(), ("json", "null"));
    /// ```
    pub fn table_and_field(&self) -> (&'static str, &'static str) {
        self.name.split_once('.').unwrap_or(("", self.name))
    }
}

/// A [`BuiltinValue`], as code names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BuiltinValueId {
    /// `json.null`
    JsonNull,
}

/// Every built-in value.
pub const BUILTIN_VALUES: &[BuiltinValue] = &[BuiltinValue {
    id: BuiltinValueId::JsonNull,
    name: "json.null",
    provider: BuiltinProvider::Json,
    lua_type: "userdata",
    doc: "The JSON null: what json.decode gives for null and json.encode writes as null.",
}];

/// The built-in called `name` (`print`, `re.find`), if there is one.
pub fn get(name: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|b| b.name == name)
}

/// Whether `name` is a global the built-ins define (`print`, `re`, …).
pub fn is_global(name: &str) -> bool {
    BUILTINS.iter().any(|b| b.global() == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_primitives_live_in_the_hidden_table_the_library_reads() {
        for builtin in BuiltinProvider::Primitives.functions() {
            assert_eq!(builtin.global(), super::super::TEXT_PRIMITIVES_GLOBAL);
        }
        assert!(is_global(super::super::TEXT_PRIMITIVES_GLOBAL));
    }

    #[test]
    fn each_row_sits_at_its_ids_discriminant() {
        for (i, builtin) in BUILTINS.iter().enumerate() {
            assert_eq!(builtin.id as usize, i, "{}", builtin.name);
            assert_eq!(builtin.id.name(), builtin.name);
        }
    }

    #[test]
    fn names_are_unique_and_each_doc_declares_its_function() {
        for (i, builtin) in BUILTINS.iter().enumerate() {
            assert!(
                BUILTINS[..i].iter().all(|b| b.name != builtin.name),
                "{} twice",
                builtin.name
            );
            let declaration = format!("\nfunction {}(", builtin.name);
            assert!(builtin.doc.contains(&declaration), "{}", builtin.name);
            assert!(!builtin.doc_comment().contains("\nfunction "));
        }
    }

    #[test]
    fn a_providers_functions_share_its_scope_and_are_contiguous() {
        let mut seen = Vec::new();
        for builtin in BUILTINS {
            if seen.last() != Some(&builtin.provider) {
                assert!(
                    !seen.contains(&builtin.provider),
                    "{:?} split",
                    builtin.provider
                );
                seen.push(builtin.provider);
            }
        }
        assert_eq!(seen[..BuiltinProvider::ALL.len()], BuiltinProvider::ALL);
        assert_eq!(
            seen[BuiltinProvider::ALL.len()..],
            [BuiltinProvider::Primitives]
        );
        for provider in BuiltinProvider::ALL {
            let scopes: Vec<Scope> = provider.functions().map(|b| b.scope).collect();
            assert!(scopes.windows(2).all(|w| w[0] == w[1]), "{provider:?}");
        }
    }
}
