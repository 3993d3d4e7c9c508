//! A resumed run's settings: what was given again over what its trace recorded.

use crate::rlm::trajectory::Setup;

use super::RunSettings;

impl RunSettings {
    /// These settings, each one not given taken from `recorded` (a trace's root `start`
    /// line): the model, its server (never its key), the reply settings, the prompt, the
    /// window and the budgets. What `rlm ask --resume` and Python's `ask(resume=…)` run
    /// with, so that a resumed run is set up as it was unless told otherwise.
    ///
    /// ```
    /// use rlm_registry::rlm::trajectory::Setup;
    /// use rlm_registry::setup::RunSettings;
    ///
    /// let recorded = Setup { model: Some("recorded-model".into()), base_url: Some("http://a/v1".into()), ..Setup::default() };
    /// let given = RunSettings { base_url: Some("http://b/v1".into()), ..RunSettings::default() };
    /// let settings = given.or_recorded(&recorded);
    /// assert_eq!(settings.model.as_deref(), Some("recorded-model"));
    /// assert_eq!(settings.base_url.as_deref(), Some("http://b/v1"), "given again: it wins");
    /// ```
    pub fn or_recorded(mut self, recorded: &Setup) -> RunSettings {
        fill(&mut self.model, recorded.model.clone());
        fill(&mut self.base_url, recorded.base_url.clone());
        fill(&mut self.max_reply_tokens, recorded.max_reply_tokens);
        fill(&mut self.reasoning_effort, recorded.reasoning_effort);
        fill(
            &mut self.prompt_mode,
            recorded.prompt_mode.as_deref().and_then(|m| m.parse().ok()),
        );
        fill(
            &mut self.answer_protocol,
            recorded
                .answer_protocol
                .as_deref()
                .and_then(|p| p.parse().ok()),
        );
        if let Some(limits) = recorded.limits {
            fill(&mut self.context_window, limits.context_window);
            let budgets = limits.budgets;
            fill(&mut self.max_tokens, budgets.total_tokens);
            fill(&mut self.max_llm_calls, budgets.llm_calls);
            fill(
                &mut self.max_time,
                budgets.wall_time_ms.map(|ms| ms as f64 / 1000.0),
            );
            fill(&mut self.max_cost, budgets.max_cost.map(|cost| cost.usd()));
        }
        self
    }
}

fn fill<T>(slot: &mut Option<T>, recorded: Option<T>) {
    if slot.is_none() {
        *slot = recorded;
    }
}
