"""LangChain's ``SummarizationMiddleware`` unit tests that fail against ``memory.middleware`` on
purpose: test name -> the documented difference (``migration_guide.md``, "LangChain's own
tests"). ``tests/test_upstream_suite.py`` asserts that exactly these fail and every other
test passes, so the list stays true in both directions."""

DEFERRED = "a failed summary never fails the turn: the fold is deferred, every message kept"
RETRIES = "memshift's summary_retries (3 attempts, every error) instead of stock's with_retry"
OVERFLOW = "an overflowing summary input is folded in chunks, not retried once with its middle cut"
NO_TRIM = "everything cut is summarized (no trim_tokens_to_summarize; langchain#39261)"
WINDOW = "the window never counts the summary message; a cut moves forward past tool results"
OWN_COUNT = ("the policy's own count of the window decides (not provider-reported usage, not "
             "the total handed to the private _should_summarize)")
ATTRIBUTES = "the policy decides: keep/trigger set after construction change nothing"
SUMMARIZER = ("summarizer= of stock (a Runnable or function) is not mapped: memory.middleware's "
              "writer is memshift's fold; use SummaryMemory(summarizer=...)")

DIFFERENCES = {
    "test_summarization_middleware_initialization": NO_TRIM,
    "test_summarization_middleware_summary_creation": DEFERRED,
    "test_create_summary_raises_on_failure": DEFERRED,
    "test_acreate_summary_raises_on_failure": DEFERRED,
    "test_create_summary_does_not_retry_non_retryable_errors": RETRIES,
    "test_create_summary_recovers_from_context_overflow": OVERFLOW,
    "test_acreate_summary_recovers_from_context_overflow": OVERFLOW,
    "test_create_summary_raises_on_persistent_context_overflow": OVERFLOW,
    "test_summarization_middleware_before_model_raises_on_summary_failure": DEFERRED,
    "test_summarization_middleware_abefore_model_raises_on_summary_failure": DEFERRED,
    "test_summarization_middleware_e2e_failure_raises_without_corrupting_history": DEFERRED,
    "test_summarization_middleware_profile_inference_triggers_summary": WINDOW,
    "test_summarization_middleware_token_retention_preserves_ai_tool_pairs": WINDOW,
    "test_summarization_middleware_trim_messages_error_fallback": NO_TRIM,
    "test_summarization_middleware_zero_and_negative_target_tokens": ATTRIBUTES,
    "test_summarization_middleware_async_error_handling": DEFERRED,
    "test_summarization_adjust_token_counts": OWN_COUNT,
    "test_summarization_before_model_uses_unscaled_tokens_for_cutoff": OWN_COUNT,
    "test_reported_tokens_satisfy_tokens_within_and_clause": OWN_COUNT,
    "test_three_metric_and_clause": OWN_COUNT,
    "test_tokens_and_fraction_and_clause": OWN_COUNT,
    "test_reported_tokens_trigger_for_aliased_provider[amazon_bedrock-bedrock_converse]":
        OWN_COUNT,
    "test_reported_tokens_trigger_for_aliased_provider[openai-mantle-openai]": OWN_COUNT,
    "test_reported_tokens_trigger_for_aliased_provider[anthropic-mantle-anthropic]": OWN_COUNT,
    "test_reported_tokens_trigger_for_fraction": OWN_COUNT,
    "test_summarizer_replaces_model_call": SUMMARIZER,
    "test_summarizer_receives_trimmed_messages": SUMMARIZER,
    "test_summarizer_accepts_runnable_and_gets_summary_call_config": SUMMARIZER,
    "test_summarizer_async": SUMMARIZER,
    "test_summarizer_errors_propagate": SUMMARIZER,
    "test_chat_model_summarizer_uses_summary_prompt": SUMMARIZER,
    "test_chat_model_summarizer_keeps_profile_of_model": SUMMARIZER,
    "test_chat_model_summarizer_does_not_retry_non_retryable_errors": RETRIES,
    "test_chat_model_summarizer_overflow_budget_uses_summarizer_profile": OVERFLOW,
    "test_summarizer_non_str_return_raises_type_error": SUMMARIZER,
    "test_summarizer_non_str_return_raises_type_error_async": SUMMARIZER,
    "test_sync_summarizer_on_async_path": SUMMARIZER,
    "test_async_summarizer_on_sync_path_raises": SUMMARIZER,
}

# skipped by the suite itself (its `requires` marker), not by memshift
SKIPS = {"test_usage_metadata_trigger":
         "requires langchain_anthropic (not installed)"}
