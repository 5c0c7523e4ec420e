//! The store conformance suite: every case runs on SQLite, and on PostgreSQL
//! when `CAIRN_TEST_POSTGRES_URL` is set (`CAIRN_REQUIRE_POSTGRES=1` makes its
//! absence a failure, as in CI).
#![expect(clippy::unwrap_used, reason = "test helpers unwrap freely")]

mod admission;
mod background;
mod baseline;
mod burst;
mod channels;
mod claims;
mod cost_agents;
mod cost_tools;
mod daemons;
mod deferred_runs;
mod fixture;
mod gateway;
mod jobs;
mod memory;
mod notifications;
mod portable;
mod reap;
mod retention;
mod routines;
mod runs;
mod schedule_ops;
mod secret_leaks;
mod sessions;
mod settings;
mod turns;
mod vault;

macro_rules! conformance {
    ($($module:ident :: $case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let fx = crate::fixture::Fixture::sqlite().await;
                    crate::$module::$case(&fx).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let Some(fx) = crate::fixture::Fixture::postgres(stringify!($case)).await else { return };
                    crate::$module::$case(&fx).await;
                    fx.cleanup().await;
                }
            )*
        }
    };
}

conformance!(
    baseline::a_database_made_from_the_baseline_equals_one_migrated_step_by_step,
    claims::a_claim_ahead_gives_runs_back_until_it_is_begun,
    channels::one_process_polls_a_channel_and_the_cursor_survives_it,
    channels::channel_users_are_allowed_once_and_strangers_told_once,
    channels::a_pairing_code_allows_one_channel_user,
    channels::a_channel_message_is_taken_once_until_it_is_forgotten,
    channels::a_kept_delivery_waits_until_it_is_forgotten,
    daemons::a_daemon_is_recorded_listed_and_withdrawn,
    daemons::an_admission_tells_of_a_lease_only_when_it_is_the_earliest,
    daemons::no_lease_end_when_nothing_runs,
    background::background_tasks_finish_once_and_deliver_once,
    background::background_tasks_of_a_dead_process_are_reaped_as_interrupted,
    background::recent_background_tasks_span_sessions_newest_first,
    admission::a_slot_is_admitted_once_and_moves_next_fire,
    admission::a_one_shot_is_disabled_by_its_claim,
    admission::catch_up_records_every_slot_of_one_claim,
    admission::each_guardrail_refuses_with_a_recorded_reason,
    admission::dedup_refuses_the_same_payload_within_the_window,
    admission::max_runs_disables_the_routine,
    admission::a_deleted_routine_admits_nothing,
    admission::finishing_keeps_state_and_notification,
    admission::retention_prunes_old_ended_runs,
    retention::retention_keeps_places_in_start_then_id_order,
    retention::a_later_batch_prunes_the_routines_named_to_it,
    admission::a_reaped_run_is_not_a_failure,
    admission::a_quiet_admission_records_one_refusal_per_reason_a_window,
    admission::definition_changes_bump_the_version,
    admission::finishing_with_retain_prunes_in_the_same_write,
    admission::only_triggered_routines_are_listed_for_the_engine,
    admission::a_batch_admits_in_order_with_per_routine_limits,
    admission::a_batch_with_a_run_limit_disables_in_order,
    admission::a_batch_of_run_ends_matches_ending_them_one_by_one,
    deferred_runs::a_batch_reads_the_runs_it_has_not_written_yet,
    deferred_runs::a_fire_whose_run_id_is_taken_is_taken,
    gateway::tokens_authenticate_until_revoked_or_expired,
    gateway::a_pairing_code_buys_one_token,
    gateway::wrong_pairing_codes_void_every_code_at_the_limit,
    gateway::idempotency_keys_replay_the_first_response,
    gateway::a_lapsed_idempotency_claim_is_free_again,
    gateway::a_one_time_key_is_seen_once_within_its_ttl,
    settings::migrations_apply_once,
    secret_leaks::secret_leaks_are_recorded_and_listed_newest_first,
    settings::settings_round_trip,
    settings::settings_prefix_is_literal,
    vault::vault_values_are_sealed_listed_resolved_and_removed,
    vault::a_wrong_key_is_named_and_changes_nothing,
    vault::a_rekey_moves_every_value_at_once_and_resumes,
    routines::routine_round_trips,
    routines::routine_names_are_unique_per_user,
    routines::update_and_delete_missing_routine,
    routines::saving_several_routines_is_all_or_nothing,
    routines::enable_disable,
    routines::routines_are_counted_with_the_enabled_ones,
    routines::due_routines_in_order,
    routines::delete_cascades_to_runs,
    burst::a_burst_is_admitted_once_and_counted,
    burst::two_processes_admitting_one_burst_run_each_slot_once,
    burst::a_slot_already_run_is_not_run_again_in_a_burst,
    burst::later_fires_in_a_batch_see_the_rounds_before_them,
    burst::a_burst_of_run_ends_keeps_each_routines_streak_and_retention,
    burst::a_burst_of_run_ends_some_already_ended_ends_the_rest,
    burst::a_success_resets_its_own_streak_however_many_are_failing,
    burst::an_end_encoded_ahead_is_stored_as_given,
    burst::a_slot_waiting_its_turn_holds_the_next_round_of_a_burst,
    burst::a_claim_read_ahead_takes_only_routines_still_as_read,
    runs::a_slot_fires_once,
    runs::a_slot_fires_only_while_current_enabled_and_unpaused,
    runs::concurrent_fires_from_separate_pools_yield_one_run,
    runs::slot_key_is_unique,
    runs::unscheduled_runs_never_collide,
    runs::finish_run_once_and_failure_streak,
    runs::runs_listed_newest_first,
    runs::orphans_are_reaped_and_stop_counting,
    runs::reaping_never_overrides_a_renewed_lease,
    reap::an_interrupted_slot_is_rerun_once_as_attempt_two,
    reap::concurrent_reapers_record_one_attempt_two_per_slot,
    reap::slots_that_are_not_safe_to_repeat_say_why_they_are_not_rerun,
    reap::a_rerun_obeys_the_concurrency_limits,
    reap::a_home_reaps_its_predecessors_and_nothing_else,
    reap::the_attempt_migration_keeps_runs_as_first_attempts,
    schedule_ops::a_paused_routine_keeps_its_slot_and_fires_nothing,
    schedule_ops::jitter_moves_when_a_slot_fires_not_the_slot,
    schedule_ops::overlap_rounds_record_every_slot_with_its_fate,
    schedule_ops::waiting_slots_start_one_at_a_time_oldest_first,
    schedule_ops::pause_after_failures_pauses_once_with_its_notification,
    schedule_ops::tries_are_kept_beside_their_run,
    sessions::concurrent_first_messages_create_one_session,
    sessions::session_updates_persist,
    sessions::threads_round_trip,
    sessions::checkpoints_push_trim_and_replace,
    sessions::concurrent_checkpoint_pushes_take_distinct_positions,
    sessions::deleting_a_session_removes_its_threads,
    turns::turns_are_rows_shown_through_the_view,
    turns::messages_of_a_running_turn_are_recorded_as_they_come,
    turns::undone_turns_can_be_dropped,
    turns::json_threads_are_converted_to_rows,
    notifications::notifications_round_trip_and_list,
    notifications::a_notification_is_claimed_by_one_process,
    notifications::attempts_are_recorded_and_a_lapsed_lease_is_reclaimed,
    notifications::undeliverable_notifications_end_in_the_inbox,
    notifications::a_conversation_takes_its_notices_once,
    notifications::each_channels_deliveries_are_summed,
    jobs::job_round_trips,
    jobs::jobs_listed_recent_first_with_filters,
    jobs::jobs_named_by_the_start_or_end_of_their_id,
    jobs::start_job_only_from_pending,
    jobs::concurrent_starts_from_separate_pools_yield_one_winner,
    jobs::finish_job_once_and_never_over_a_verdict,
    jobs::cancel_requests_by_state,
    jobs::stuck_jobs_and_activity,
    jobs::orphaned_jobs_are_reaped_as_interrupted,
    cost_agents::each_agents_spend_adds_up_with_the_call_that_records_it,
    cost_agents::an_agent_over_its_share_is_refused_while_the_others_go_on,
    cost_tools::spend_adds_up_and_reservations_hold_the_budget,
    cost_tools::spend_per_day_and_model_adds_up_and_reads_back_in_order,
    cost_tools::the_hourly_window_slides_and_names_the_next_slot,
    cost_tools::concurrent_admissions_never_overshoot_the_hourly_limit,
    cost_tools::the_old_settings_blob_is_migrated,
    cost_tools::tools_are_disabled_once_and_enabled_again,
    cost_tools::quiet_jobs_are_restarted_then_given_up,
    memory::memories_store_update_and_forget,
    memory::memory_keyword_search_folds_accents,
    memory::memory_embeddings_and_cache,
    memory::memory_hygiene_never_touches_core,
    memory::memory_is_each_agents_own_unless_shared,
    memory::memory_keys_are_per_agent,
    memory::memory_hygiene_is_per_agent,
    memory::old_memories_belong_to_main,
    portable::the_copier_knows_every_table,
    portable::a_copy_keeps_every_row_of_every_table,
    portable::a_copy_through_json_lines_is_the_same,
);
