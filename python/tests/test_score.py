"""score: an answer scored as `rlm eval` scores it, and the scorers it refuses."""

import pytest

from rlm_registry import score


def test_exact_ignores_case_quotes_outer_space_and_a_final_period_only():
    assert score(' "Location." ', "location") == 1.0
    assert score("AMBER", "amber") == 1.0
    assert score("the location", "location") == 0.0


def test_exact_is_the_default_and_contains_finds_the_answer_inside_a_sentence():
    assert score("It is Paris, I think", "paris") == 0.0
    assert score("It is Paris, I think", "paris", "contains") == 1.0


def test_numeric_scores_the_first_number_by_oolong_formula():
    assert score("I count 12 records", "14", "numeric") == 0.5625
    assert score("14", "14", "numeric") == 1.0


def test_f1_set_scores_unordered_tuples():
    assert score("(1, 2), (3, 4)", "(2, 1)", "f1_set") == pytest.approx(2 / 3)


def test_judge_is_refused_since_it_needs_a_model():
    with pytest.raises(ValueError, match="judge"):
        score("a", "a", "judge")


def test_an_unknown_scorer_is_refused_naming_the_scorers():
    with pytest.raises(ValueError, match="no scorer `fuzzy`: exact, contains"):
        score("a", "a", "fuzzy")  # type: ignore[arg-type]


def test_a_numeric_task_whose_expected_answer_is_no_number_is_refused():
    with pytest.raises(ValueError, match="not a number"):
        score("12", "many", "numeric")
