//! [`RlmSession`]: several questions asked of one root agent in turn, as a chat goes on.
//! The agent keeps its environment (every global the code set, the context loaded once)
//! and its conversation (each earlier question, the turns that answered it, and the
//! reply with the answer); each question has the iteration cap and the budgets to
//! itself.

use std::sync::Arc;

use crate::corpus::Document;
use crate::environment::Environment;
use crate::llm::UsageSnapshot;

use super::agent::Agent;
use super::budget::{Ledger, UsageReport};
use super::builder::Rlm;
use super::compaction::Conversation;
use super::context::Context;
use super::prompt;
use super::report::{Report, RlmError};
use super::resume::{ResumeError, check_recorded};
use super::trajectory::Record;

/// A conversation with one root agent over one context: see [`Rlm::session`].
pub struct RlmSession {
    agent: Agent,
    env: Environment,
    context: Option<Context>,
    /// Documents added since the last question, named in the next one.
    added: Vec<String>,
    /// The system prompt the first question begins with, made with the session (it
    /// describes the context, which takes a count of its tokens).
    system: String,
    /// `None` until the first question begins it.
    conversation: Option<Conversation>,
    /// What the conversation's last assistant message is when the next question comes:
    /// the reply with the last answer, or the note that there was none.
    last_reply: String,
}

impl std::fmt::Debug for RlmSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RlmSession")
            .field("context", &self.context.is_some())
            .field("questions_asked", &self.conversation.is_some())
            .finish()
    }
}

impl Rlm {
    /// A session over `context`: its root agent's environment is made now (the context
    /// loaded once), and each [`RlmSession::ask`] goes on with the same environment and
    /// conversation, so the code of a later question finds the globals an earlier one
    /// set, and the model sees the earlier questions and answers. Each question has the
    /// iteration cap and the budgets to itself; usage is reported per question.
    ///
    /// A session lives on the thread that made it (the Lua state is not `Send`).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use rlm_registry::Registry;
    /// use rlm_registry::llm::{Completion, Llm, LlmError, Request};
    /// use rlm_registry::rlm::Rlm;
    ///
    /// struct Scripted(AtomicUsize);
    /// impl Llm for Scripted {
    ///     fn complete(&self, _request: Request) -> Result<Completion, LlmError> {
    ///         Ok(Completion::new(match self.0.fetch_add(1, Ordering::SeqCst) {
    ///             0 => "```lua\nseen = 41\nFINAL('noted')\n```",
    ///             _ => "```lua\nFINAL(seen + 1)\n```",
    ///         }))
    ///     }
    /// }
    ///
    /// let rlm = Rlm::new(Arc::new(Scripted(AtomicUsize::new(0))), Registry::baked().clone(), 5);
    /// let mut session = rlm.session(None)?;
    /// assert_eq!(session.ask("Remember 41.").result?, "noted");
    /// assert_eq!(session.ask("What comes after it?").result?, "42");
    /// # Ok::<(), rlm_registry::rlm::RlmError>(())
    /// ```
    pub fn session(&self, context: Option<Context>) -> Result<RlmSession, RlmError> {
        let config = self.run_config();
        let ledger = Ledger::for_run(&config);
        let agent = Agent::root(config, ledger);
        let env = agent.open(context.as_ref(), None)?;
        let system = agent.system_prompt(&env, context.as_ref());
        Ok(RlmSession {
            agent,
            env,
            context,
            system,
            added: Vec::new(),
            conversation: None,
            last_reply: String::new(),
        })
    }
}

impl RlmSession {
    /// Answers `question`, going on from the questions before it: the answer or why
    /// there is none, the turns it took and what it used.
    ///
    /// A question that a cancellation ([`Rlm::cancel_on`]) stopped leaves that handle
    /// interrupted: [`reset`](crate::environment::Interrupt::reset) it before the next
    /// question, or that one stops at once too.
    pub fn ask(&mut self, question: &str) -> Report {
        let ledger = Arc::clone(&self.agent.ledger);
        let before = ledger.report();
        ledger.renew();
        self.env.renew_token_budget();
        let (result, turns) = match self.conversation(question) {
            Ok(mut conversation) => {
                let outcome = self.agent.turns(&self.env, &mut conversation);
                self.conversation = Some(conversation);
                outcome
            }
            Err(error) => (Err(error), 0),
        };
        let (result, value) = match result {
            Ok(answer) => {
                self.last_reply = answer.reply;
                (Ok(answer.text), answer.value)
            }
            Err(error) => {
                self.last_reply = prompt::unanswered(&error.to_string());
                (Err(error), None)
            }
        };
        Report {
            result,
            value,
            turns,
            usage: since(&before, ledger.report()),
        }
    }

    /// Adds `documents` to the context (a text becomes a corpus, see
    /// [`Context::with_documents`]), for the next question and those after it; the
    /// next question names them.
    pub fn add_documents(&mut self, documents: Vec<Document>) -> Result<(), RlmError> {
        if documents.is_empty() {
            return Ok(());
        }
        self.added
            .extend(documents.iter().map(|document| document.name.clone()));
        let context = Context::with_documents(self.context.take(), documents);
        let loaded = context.load_into(&self.env).map_err(RlmError::Context);
        if self.conversation.is_none() {
            self.system = self.agent.system_prompt(&self.env, Some(&context));
        }
        self.context = Some(context);
        loaded
    }

    /// Whether the question `records` hold (its trace) was asked over this session's
    /// context, its documents added so far, and with its registry: a session rebuilt
    /// from its record ([`Rlm::playing_back`]) checks its first question so, as a resumed
    /// run does.
    pub fn check_recorded(&self, records: &[Record]) -> Result<(), ResumeError> {
        check_recorded(records, &self.agent.config.registry, self.context.as_ref())
    }

    /// The conversation that asks `question`: begun with it, or the session's going on.
    fn conversation(&mut self, question: &str) -> Result<Conversation, RlmError> {
        match self.conversation.take() {
            None => {
                // The system prompt describes them with the rest of the context.
                self.added.clear();
                let system = std::mem::take(&mut self.system);
                self.agent
                    .begin_with(&self.env, system, question, self.context.as_ref())
            }
            Some(mut conversation) => {
                // The last answer was taken: the loop ends on the next one given.
                self.env.take_final_answer();
                self.env.take_rejected_answer();
                let protocol = self.agent.config.answer_protocol;
                let reply = std::mem::take(&mut self.last_reply);
                let added = std::mem::take(&mut self.added);
                let question = prompt::follow_up(question, &added, protocol);
                conversation.follow_up(reply, question);
                conversation.share(&self.env);
                Ok(conversation)
            }
        }
    }
}

/// The usage of `now` that came after `before` (the ledger's clock was started again).
fn since(before: &UsageReport, now: UsageReport) -> UsageReport {
    let zero = UsageSnapshot::default();
    UsageReport {
        by_depth: now
            .by_depth
            .iter()
            .enumerate()
            .map(|(depth, usage)| *usage - *before.by_depth.get(depth).unwrap_or(&zero))
            .collect(),
        elapsed: now.elapsed,
        compactions: now.compactions.saturating_sub(before.compactions),
        compaction_tokens: now
            .compaction_tokens
            .saturating_sub(before.compaction_tokens),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::Registry;
    use crate::environment::Interrupt;
    use crate::llm::{Completion, Llm, LlmError, Request};
    use crate::rlm::Budgets;

    /// Answers with its replies in order (the last one again once they run out), and
    /// keeps every request.
    struct Scripted {
        replies: Vec<&'static str>,
        requests: Mutex<Vec<Request>>,
    }

    impl Scripted {
        fn new(replies: &[&'static str]) -> Arc<Scripted> {
            Arc::new(Scripted {
                replies: replies.to_vec(),
                requests: Mutex::default(),
            })
        }

        fn request(&self, n: usize) -> Request {
            self.requests.lock().unwrap()[n].clone()
        }
    }

    impl Llm for Scripted {
        fn complete(&self, request: Request) -> Result<Completion, LlmError> {
            let mut requests = self.requests.lock().unwrap();
            let n = requests.len().min(self.replies.len() - 1);
            requests.push(request);
            Ok(Completion::new(self.replies[n]).with_tokens(100, 10))
        }
    }

    fn texts(request: &Request) -> Vec<String> {
        request
            .messages
            .iter()
            .map(|m| m.text().to_string())
            .collect()
    }

    #[test]
    fn a_second_question_finds_the_globals_and_sees_the_first_exchange() {
        let llm = Scripted::new(&[
            "```lua\nkept = #context\nFINAL('first')\n```",
            "```lua\nFINAL('kept ' .. kept)\n```",
        ]);
        let rlm = Rlm::new(llm.clone(), Registry::baked().clone(), 5);
        let mut session = rlm.session(Some(Context::from("abcd"))).unwrap();
        assert_eq!(session.ask("Q1").result.unwrap(), "first");
        let second = session.ask("Q2");
        assert_eq!(second.result.unwrap(), "kept 4");
        let sent = texts(&llm.request(1));
        assert_eq!(
            sent.len(),
            4,
            "system, Q1, the answer's reply, Q2: {sent:?}"
        );
        assert!(sent[1].starts_with("Q1"));
        assert!(sent[2].contains("FINAL('first')"));
        assert!(sent[3].starts_with("Q2") && sent[3].contains("same session"));
        assert_eq!(second.turns, 1);
        assert_eq!(second.usage.total().calls, 1, "usage is the question's own");
    }

    #[test]
    fn each_question_has_the_iteration_cap_and_the_budgets_to_itself() {
        let llm = Scripted::new(&[
            "```lua\nprint(1)\n```",
            "```lua\nprint(2)\n```",
            "```lua\nFINAL('done')\n```",
        ]);
        let budgets = Budgets::default().with_llm_calls(2);
        let rlm = Rlm::new(llm, Registry::baked().clone(), 2).budgets(budgets);
        let mut session = rlm.session(None).unwrap();
        let first = session.ask("Q1");
        assert!(matches!(
            first.result,
            Err(RlmError::IterationLimit { max_iterations: 2 })
        ));
        let second = session.ask("Q2");
        assert_eq!(
            second.result.unwrap(),
            "done",
            "two calls again, one needed"
        );
    }

    #[test]
    fn an_unanswered_question_is_noted_and_the_next_one_goes_on_after_a_reset() {
        let llm = Scripted::new(&["```lua\nFINAL('after')\n```"]);
        let cancel = Interrupt::new();
        let rlm = Rlm::new(llm.clone(), Registry::baked().clone(), 3).cancel_on(cancel.clone());
        let mut session = rlm.session(None).unwrap();
        cancel.interrupt();
        assert!(matches!(
            session.ask("Q1").result,
            Err(RlmError::Interrupted)
        ));
        cancel.reset();
        assert_eq!(session.ask("Q2").result.unwrap(), "after");
        let sent = texts(&llm.request(0));
        assert!(
            sent[2].starts_with("(No answer to that question"),
            "{sent:?}"
        );
    }
}
