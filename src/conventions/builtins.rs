//! The built-ins' documentation (SPEC §4), in the same LuaLS form as registry
//! functions: what `help` prints, what the model's prompt lists, and what
//! `Registry::lookup("builtin:…")` finds. The functions themselves are implemented in
//! Rust by the environment (feature `runtime`); their documentation is plain data, kept
//! here with the names a registry function may not take, so that builds without the
//! runtime can still look built-ins up.

/// One built-in's documentation, in the same LuaLS form as registry functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuiltinDoc {
    /// The global name.
    pub name: &'static str,
    /// The doc comment and a stub declaration, as the model reads them.
    pub doc: &'static str,
}

/// Every built-in's documentation, in the order the prompt lists them.
pub const DOCS: &[BuiltinDoc] = &[
    BuiltinDoc {
        name: "print",
        doc: "--- Prints its arguments (tab-separated) to the execution's output, which is what you get back.\n---@param ... any Values to print\nfunction print(...) end",
    },
    BuiltinDoc {
        name: "llm_query",
        doc: "--- Asks a sub-model one question and returns its answer. Use it on pieces of the context.\n---@param prompt string The whole prompt, including any text to read\n---@return string answer The model's answer\nfunction llm_query(prompt) end",
    },
    BuiltinDoc {
        name: "llm_query_batched",
        doc: "--- Asks a sub-model several questions concurrently; much faster than calling llm_query in a loop.\n--- A failed call gives \"error: ...\" in its place.\n---@param prompts string[] The prompts\n---@return string[] answers The answers, in the same order\nfunction llm_query_batched(prompts) end",
    },
    BuiltinDoc {
        name: "FINAL",
        doc: "--- Gives the final answer and ends the run.\n---@param value any The answer (converted with tostring)\nfunction FINAL(value) end",
    },
    BuiltinDoc {
        name: "FINAL_VAR",
        doc: "--- Gives the value of a global variable as the final answer and ends the run.\n---@param name string The variable's name, e.g. FINAL_VAR(\"answer\")\nfunction FINAL_VAR(name) end",
    },
    BuiltinDoc {
        name: "token_count",
        doc: "--- Counts the tokens of a text exactly (o200k_base).\n---@param text string The text\n---@return integer count The number of tokens\nfunction token_count(text) end",
    },
    BuiltinDoc {
        name: "token_truncate",
        doc: "--- Returns the longest prefix of a text with at most n tokens.\n---@param text string The text\n---@param n integer The most tokens to keep\n---@return string prefix The truncated text\nfunction token_truncate(text, n) end",
    },
    BuiltinDoc {
        name: "token_split",
        doc: "--- Splits a text into pieces of at most n tokens; consecutive pieces share `overlap` tokens.\n---@param text string The text\n---@param n integer The most tokens per piece\n---@param overlap? integer Tokens shared by consecutive pieces (default 0, less than n)\n---@return string[] pieces The pieces, in order\nfunction token_split(text, n, overlap) end",
    },
    BuiltinDoc {
        name: "token_budget",
        doc: "--- Returns how many tokens the session may still spend on sub-model calls (math.huge if unlimited).\n---@return number remaining The remaining tokens\nfunction token_budget() end",
    },
    BuiltinDoc {
        name: "store_list",
        doc: "--- Lists the variables you have made: each entry has name, type, size and a short preview.\n---@return table[] variables One table per variable, sorted by name\nfunction store_list() end",
    },
    BuiltinDoc {
        name: "store_summarize",
        doc: "--- Describes one variable: its type, size and a longer preview.\n---@param name string The variable's name\n---@return string summary The description\nfunction store_summarize(name) end",
    },
    BuiltinDoc {
        name: "rlm_query",
        doc: "--- Hands a sub-task to a child agent with its own REPL (one level deeper), which can itself read `context` and call functions; returns its final answer.\n--- At the depth limit it is a plain llm_query.\n---@param prompt string The sub-task\n---@param context? string The child's `context` (default: none)\n---@return string answer The child's final answer\nfunction rlm_query(prompt, context) end",
    },
    BuiltinDoc {
        name: "rlm_query_batched",
        doc: "--- Runs several child agents concurrently, like rlm_query for each prompt; a failed child gives \"error: ...\".\n---@param prompts string[] The sub-tasks\n---@param contexts? string[] One context per prompt\n---@return string[] answers The answers, in order\nfunction rlm_query_batched(prompts, contexts) end",
    },
    BuiltinDoc {
        name: "ask_user",
        doc: "--- Asks the human user a question and waits for the answer. Slow: batch your questions, and ask only what you cannot find out yourself.\n---@param question string The question\n---@return string answer The user's answer\nfunction ask_user(question) end",
    },
    BuiltinDoc {
        name: "notify_user",
        doc: "--- Tells the human user something (progress, a finding) without waiting for an answer.\n---@param message string The message\nfunction notify_user(message) end",
    },
    BuiltinDoc {
        name: "re.find",
        doc: "--- Regular expressions (`re.*`): Python/PCRE-style syntax (\\d \\w \\s \\b, [a-z], (a|b), x{2,5}, (?P<name>...), lazy *?), linear time, no backreferences or look-around. Write patterns in [[long brackets]] to keep backslashes. Offsets are 1-based bytes, like string.find/string.sub. `flags` is a string of: i (ignore case), m (^ and $ at each line), s (. matches newline), x (verbose), U (lazy by default); (?i) inline works too.\n--- Finds the first match: its start and end, then its groups (nil for a group that did not take part).\n---@param text string The text\n---@param pattern string The regular expression\n---@param init? integer Where to start (default 1; negative counts from the end)\n---@param flags? string Flags, e.g. \"i\"\n---@return integer|nil start Start of the match, nil if none\n---@return integer|nil end End of the match (inclusive)\n---@return string ... The groups\nfunction re.find(text, pattern, init, flags) end",
    },
    BuiltinDoc {
        name: "re.match",
        doc: "--- Like string.match with a regular expression: the groups of the first match, or the whole match if the pattern has none; nil if no match. Not anchored: start the pattern with ^ for that.\n---@param text string The text\n---@param pattern string The regular expression\n---@param init? integer Where to start (default 1)\n---@param flags? string Flags, e.g. \"i\"\n---@return string|nil ... The groups, or the whole match\nfunction re.match(text, pattern, init, flags) end",
    },
    BuiltinDoc {
        name: "re.gmatch",
        doc: "--- Iterates over the matches, like string.gmatch: each step gives the groups, or the whole match if the pattern has none.\n--- for key, value in re.gmatch(text, [[(\\w+)=(\\d+)]]) do ... end\n---@param text string The text\n---@param pattern string The regular expression\n---@param flags? string Flags, e.g. \"i\"\n---@return function iterator The iterator\nfunction re.gmatch(text, pattern, flags) end",
    },
    BuiltinDoc {
        name: "re.find_all",
        doc: "--- Every non-overlapping match, like Python's re.findall: the whole matches if the pattern has no group, the group if it has one, a table of groups (false for one that did not take part) otherwise.\n---@param text string The text\n---@param pattern string The regular expression\n---@param flags? string Flags, e.g. \"i\"\n---@return table matches The matches, in order\nfunction re.find_all(text, pattern, flags) end",
    },
    BuiltinDoc {
        name: "re.count",
        doc: "--- Counts the non-overlapping matches.\n---@param text string The text\n---@param pattern string The regular expression\n---@param flags? string Flags, e.g. \"i\"\n---@return integer count The number of matches\nfunction re.count(text, pattern, flags) end",
    },
    BuiltinDoc {
        name: "re.split",
        doc: "--- Splits a text at every match of the pattern (the matches are dropped).\n---@param text string The text\n---@param pattern string The separator, a regular expression\n---@param max? integer At most this many splits (default: all)\n---@param flags? string Flags, e.g. \"i\"\n---@return string[] pieces The pieces, in order (empty ones included)\nfunction re.split(text, pattern, max, flags) end",
    },
    BuiltinDoc {
        name: "re.gsub",
        doc: "--- Replaces matches, like string.gsub: `replacement` is a string where $0 is the match, $1 or ${1} a group, ${name} a named group and $$ a dollar sign; or a function called with the groups (or the match) whose string result replaces it (nil or false keeps it); or a table indexed by the first group (or the match). re.replace is the same function.\n---@param text string The text\n---@param pattern string The regular expression\n---@param replacement string|function|table What to put in place of each match\n---@param max? integer At most this many replacements (default: all)\n---@param flags? string Flags, e.g. \"i\"\n---@return string result The new text\n---@return integer count The number of replacements\nfunction re.gsub(text, pattern, replacement, max, flags) end",
    },
    BuiltinDoc {
        name: "re.replace",
        doc: "--- The same function as re.gsub: replaces matches, $1 / ${name} in a string replacement.\n---@param text string The text\n---@param pattern string The regular expression\n---@param replacement string|function|table What to put in place of each match\n---@param max? integer At most this many replacements (default: all)\n---@param flags? string Flags, e.g. \"i\"\n---@return string result The new text\n---@return integer count The number of replacements\nfunction re.replace(text, pattern, replacement, max, flags) end",
    },
    BuiltinDoc {
        name: "fn_search",
        doc: "--- Searches the registry functions for a task, best match first: each result has name, signature, summary and confidence (0..1). Then call help(name) for the full documentation.\n---@param query string What you want to do, in words, or a function name\n---@param opts? table Options: max_results (default 5), capability (e.g. \"search\", \"transform\"), source (a registry directory), mode: \"fast\" (BM25, the default), \"balanced\" (an LLM reranks; counts as 1 llm_query call) or \"accurate\" (an LLM also expands the query; 2 calls). The LLM modes need an LLM (an error without one) and fall back to the fast order when the model fails\n---@return table[] results The matches, best first\n---@return table info mode; fallback: why the fast order was used (nil if not); expanded_terms: the phrases the LLM added\nfunction fn_search(query, opts) end",
    },
    BuiltinDoc {
        name: "help",
        doc: "--- Returns the documentation of a built-in or registry function; with no name, lists every name.\n---@param name? string The function's name\n---@return string doc The documentation\nfunction help(name) end",
    },
];

/// The documentation of the built-in `name`, if it is one.
pub fn doc(name: &str) -> Option<&'static BuiltinDoc> {
    DOCS.iter().find(|d| d.name == name)
}
