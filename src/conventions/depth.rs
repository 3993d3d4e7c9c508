//! A stack-safety pre-check run before full_moon parses a file.
//!
//! full_moon is a recursive-descent parser: deeply nested input (brackets, blocks, long
//! chains of unary or right-associative operators) recurses once per level and overflows
//! the stack, which aborts the process (upstream issue #322). Aborting is never an
//! acceptable answer to bad input, so this module walks the token stream (the lexer is
//! iterative) and estimates an upper bound of the parser's recursion depth. A file over
//! [`MAX_NESTING`] is reported as E001 without being parsed; anything under it is parsed on
//! a thread whose stack is sized for that bound (see `parse_stack_size`).
//!
//! The bound is deliberately generous: real Lua 5.4 itself refuses more than 200 nested
//! syntactic levels ("chunk has too many C levels"), so no valid program comes near it.

use full_moon::LuaVersion;
use full_moon::tokenizer::{Lexer, LexerResult, Token, TokenType};

/// Largest accepted estimate of parser recursion levels.
pub(crate) const MAX_NESTING: usize = 1_000;

/// Where and how deep the nesting estimate first exceeded [`MAX_NESTING`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct TooDeep {
    /// Byte offset of the token at which the limit was crossed.
    pub offset: usize,
}

/// Returns `Err` if `source` nests deeper than [`MAX_NESTING`] levels.
pub(crate) fn check_nesting(source: &str) -> Result<(), TooDeep> {
    let mut lexer = Lexer::new_lazy(source, LuaVersion::lua54());
    let mut estimate = Estimate::default();
    while let Some(result) = lexer.process_next() {
        let token = match result {
            LexerResult::Ok(token) | LexerResult::Recovered(token, _) => token,
            // The parser reports tokenizer errors itself as E001.
            LexerResult::Fatal(_) => return Ok(()),
        };
        if matches!(token.token_type(), TokenType::Eof) {
            break;
        }
        if estimate.push(&token) > MAX_NESTING {
            return Err(TooDeep {
                offset: token.start_position().bytes(),
            });
        }
    }
    Ok(())
}

/// Running estimate: every open bracket or block is a level, and so is every operator
/// in the expression being read at each open level (operators can recurse: `- - - x`,
/// `a .. b .. c`). Separators (`,` `;` `=` and statement keywords) start a new
/// expression, so long argument lists and many statements do not add up.
#[derive(Default)]
struct Estimate {
    /// Operators seen in the current expression of each open level.
    levels: Vec<usize>,
    /// Operators in the current expression at file level.
    top: usize,
    /// `levels.len() + top + sum(levels)`, kept incrementally.
    total: usize,
}

impl Estimate {
    fn push(&mut self, token: &Token) -> usize {
        let text = match token.token_type() {
            TokenType::Symbol { .. } => token.to_string(),
            TokenType::Whitespace { .. }
            | TokenType::SingleLineComment { .. }
            | TokenType::MultiLineComment { .. }
            | TokenType::Shebang { .. } => return self.total,
            _ => {
                return self.total;
            }
        };
        match text.as_str() {
            "(" | "{" | "[" | "function" | "do" | "then" | "repeat" => {
                self.reset_expression();
                self.levels.push(0);
                self.total += 1;
            }
            ")" | "}" | "]" | "end" | "until" | "elseif" => {
                self.reset_expression();
                if self.levels.pop().is_some() {
                    self.total -= 1;
                }
            }
            "," | ";" | "=" | "local" | "return" | "if" | "while" | "for" | "in" | "else"
            | "goto" | "break" => self.reset_expression(),
            "+" | "-" | "*" | "/" | "//" | "%" | "^" | ".." | "==" | "~=" | "<" | "<=" | ">"
            | ">=" | "and" | "or" | "not" | "#" | "~" | "&" | "|" | "<<" | ">>" => {
                *self.current() += 1;
                self.total += 1;
            }
            _ => {}
        }
        self.total
    }

    fn current(&mut self) -> &mut usize {
        self.levels.last_mut().unwrap_or(&mut self.top)
    }

    fn reset_expression(&mut self) {
        let current = self.current();
        let operators = std::mem::take(current);
        self.total -= operators;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_code_is_shallow() {
        let code = "local t = {}\nfunction t.f(a, b)\n  if a then return (a + b) * 2 end\nend\n";
        assert_eq!(check_nesting(code), Ok(()));
    }

    #[test]
    fn deep_parentheses_are_too_deep() {
        let code = format!("x = {}1{}", "(".repeat(5000), ")".repeat(5000));
        assert!(check_nesting(&code).is_err());
    }

    #[test]
    fn long_unary_chain_is_too_deep() {
        let code = format!("x = {}1", "~".repeat(5000));
        assert!(check_nesting(&code).is_err());
    }

    #[test]
    fn long_argument_lists_and_many_statements_are_fine() {
        let args = vec!["-1"; 5000].join(", ");
        let stmts = "a = b + c\n".repeat(5000);
        assert_eq!(check_nesting(&format!("f({args})\n{stmts}")), Ok(()));
    }

    #[test]
    fn nested_blocks_count() {
        let code = format!("{}{}", "do ".repeat(2000), "end ".repeat(2000));
        assert!(check_nesting(&code).is_err());
    }
}
