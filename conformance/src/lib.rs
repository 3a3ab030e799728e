//! The backend conformance suite: one set of protocol cases every [`turnwise::Backend`] must
//! pass, written once against the trait.
//!
//! Each case is a `pub async fn case(f: impl Fixture)` in a module named after the rule it
//! checks ([`admission`], [`children`], [`claims`], [`leases`], [`steps`], [`signals`], [`failures`],
//! [`control`], [`limits`], [`parallel`], [`nesting`], [`retention`], [`runs`], [`idempotence`], [`reads`],
//! [`outcomes`], [`schedules`], [`suspension`], [`validation`], [`brief`], [`chained`], [`versions`]). A case
//! gets a fresh [`Fixture`], drives the protocol through the backend it hands out, moves the
//! backend's clock with [`Fixture::advance`], and panics with a message naming the broken rule.
//! After every refusal it re-reads the instance to prove nothing was written.
//!
//! A backend runs the whole suite with one macro call in an integration test:
//!
//! ```no_run
//! turnwise_conformance::conformance_tests!(|config: turnwise::EngineConfig| async move {
//!     turnwise_conformance::embedded::EmbeddedFixture::memory(config)
//! });
//! ```
//!
//! The macro expands to one `#[tokio::test]` per case, so the calling crate needs `tokio`
//! (with `macros` and `rt-multi-thread`) as a dependency. The closure receives the
//! [`EngineConfig`](turnwise::EngineConfig) the case needs (every case uses the default except
//! the retention cases and [`outcomes::wait_is_capped`]) and builds a fresh fixture from it.
//!
//! The rules checked are those of `notes/semantics.md` (the engine's exact behaviour) and the
//! wire reference.

pub mod embedded;
pub mod support;
pub mod values;

pub mod admission;
pub mod brief;
pub mod chained;
pub mod children;
pub mod claims;
pub mod control;
pub mod failures;
pub mod idempotence;
pub mod leases;
pub mod limits;
pub mod nesting;
pub mod outcomes;
pub mod parallel;
pub mod reads;
pub mod retention;
pub mod runs;
pub mod schedules;
pub mod signals;
pub mod steps;
pub mod suspension;
pub mod validation;
pub mod versions;

#[doc(hidden)]
pub use turnwise as __turnwise;

use std::time::Duration;

/// What a backend under test provides: fresh backends over one store, and its clock.
///
/// A fixture is made fresh for each case, so cases never see each other's instances.
pub trait Fixture: Send + Sync + 'static {
    /// The backend type.
    type Backend: turnwise::WorkerBackend + Clone + Send + Sync + 'static;

    /// A backend addressing the default namespace.
    fn backend(&self) -> Self::Backend;

    /// A backend addressing `namespace`, over the same store and clock.
    fn backend_in(&self, namespace: &str) -> Self::Backend;

    /// Move the backend's clock forward (a `ManualClock` for the embedded engine), waking
    /// whatever became due.
    fn advance(&self, by: Duration);

    /// How many claims the backend holds parked in a long poll now: asleep until an event
    /// rings them or their next due time comes ([`turnwise::Engine::waiting_claims`] of the
    /// engine behind the backend). The long-poll cases watch it instead of sleeping for a
    /// claim to park, and to see that an event rang the claim.
    fn waiting_claims(&self) -> usize;
}

/// What a conformance macro's `$make` may return: a [`Fixture`], or `Option` of one for a
/// fixture that needs a service (PostgreSQL) and answers `None`, after printing why, when it is
/// not there; the case then passes without running.
pub trait MaybeFixture {
    /// The fixture.
    type Fixture: Fixture;
    /// The fixture, if there is one.
    fn into_fixture(self) -> Option<Self::Fixture>;
}

impl<F: Fixture> MaybeFixture for F {
    type Fixture = F;
    fn into_fixture(self) -> Option<F> {
        Some(self)
    }
}

impl<F: Fixture> MaybeFixture for Option<F> {
    type Fixture = F;
    fn into_fixture(self) -> Option<F> {
        self
    }
}

/// Move a fixture's clock forward by `ms` milliseconds.
pub fn advance_ms(f: &impl Fixture, ms: u64) {
    f.advance(Duration::from_millis(ms));
}

/// Expands to one `#[tokio::test(flavor = "multi_thread", worker_threads = 2)]` per
/// conformance case, grouped in one module per rule group.
///
/// `$make` is a closure `|config: turnwise::EngineConfig| async move { fixture }` that builds a
/// fresh [`Fixture`] for one case. Every case passes `EngineConfig::default()`, except those
/// listed with `= config` below, which pass the configuration they need.
///
/// This macro is the one list of cases: adding a case is one line here plus its function.
#[macro_export]
macro_rules! conformance_tests {
    ($make:expr) => {
        $crate::__conformance_cases! {
            make = $make;
            admission {
                create_instance,
                create_is_idempotent,
                inbox_order,
                message_dedupe,
                message_dedupe_after_history,
                claim_only_listed_workflows,
            }
            claims {
                task_shape,
                effect_prefix_rules,
                idle_claim_returns_none,
                long_poll_woken_by_admission,
                long_poll_woken_by_due_timer,
                long_poll_woken_by_signal,
                long_poll_woken_by_resume,
                namespaces_isolated,
            }
            leases {
                fencing_two_claimants,
                lease_expiry_reclaim,
                heartbeat_extends_live_lease,
                lease_expiry_exhausts,
            }
            steps {
                step_echo,
                step_position_rules,
                operation_fields,
                operation_deadline_expiry,
                operation_heartbeat_timeout,
                operation_carries_checkpoint,
                progress_sequences,
                progress_validation,
                sleep_releases_and_resumes,
                complete_commits,
                continuation_queues_behind,
            }
            parallel {
                fan_out_commits_in_order,
            }
            signals {
                buffered_before_wait,
                wait_suspends_and_resolves,
                wait_deadline,
                signal_dedupe,
                signal_to_finished_turn,
                signal_limit,
                signal_not_found,
                undeclared_name_refused,
            }
            failures {
                backoff_and_attempts,
                non_retryable_fails_at_once,
                retry_at_waits_without_attempt,
                retry_at_does_not_exhaust,
                on_exhausted_skip,
                one_run_per_attempt,
            }
            control {
                pause_resume,
                resume_clears_backoff,
                retry_failed_turn,
                skip_failed_turn,
                cancel_turn,
                wake,
                control_errors,
                delete_instance,
            }
            limits {
                steps_per_turn,
                state_size,
                output_size,
                result_size,
                message_size,
                turn_size,
                pending_messages,
                signal_size,
                progress_sizes,
                origin_size,
            }
            nesting {
                nesting_limit_on_every_route,
            }
            retention {
                prunes_old_turns = $crate::retention::config(2, ::std::time::Duration::from_secs(1)),
                zero_keep_turns_keeps_all = $crate::retention::config(0, ::std::time::Duration::from_secs(1)),
                zero_keep_for_keeps_all = $crate::retention::config(1, ::std::time::Duration::ZERO),
            }
            runs {
                one_summary_per_attempt,
                cancel_ends_the_run,
                summary_fields,
                paging_get_and_stats,
                kept_thirty_days,
                zero_retention_keeps_all = $crate::runs::keep_all_config(),
            }
            brief {
                brief_calls_write_as_full_ones,
                brief_calls_refuse_as_full_ones,
            }
            chained {
                chained_calls_write_as_apart,
                chained_calls_refuse_as_apart,
            }
            idempotence {
                checkpoint_step_repeat,
                checkpoint_sleep_repeat,
                operation_repeat,
                progress_repeat,
                wait_signal_repeat,
                complete_repeat,
            }
            reads {
                instance_status,
                list_instances_paging,
                instance_inbox,
                type_inbox,
                history_paging,
                single_turn,
                not_found,
            }
            outcomes {
                settled_turn_answers_at_once,
                woken_by_complete,
                woken_by_failure,
                woken_by_cancel,
                woken_by_settled_lease_expiry,
                wait_runs_out,
                other_instances_do_not_wake,
                delete_wakes_with_not_found,
                unknown_turn_not_found,
                wait_is_capped = $crate::outcomes::capped_config(),
            }
            children {
                reply_reaches_parent,
                reply_reaches_parent_whose_schema_declares_no_signal,
                failure_reaches_parent,
                retryable_failure_delivers_nothing,
                cancel_reaches_parent,
                outcome_before_wait_is_buffered,
                outcome_for_finished_parent_is_dropped,
            }
            schedules {
                delayed_message_fires_once_when_due,
                recurring_firings_have_deterministic_ids,
                catch_up_after_downtime,
                schedule_reads_and_control,
            }
            suspension {
                mismatch_suspends_the_turn,
                bad_reports_are_refused,
                restart_from_last_accepted,
                restart_from_scratch,
                cancel_suspended_turn,
                fork_instance,
            }
            versions {
                live_check_verdicts,
                upgrade_moves_the_movable,
                upgrade_checks_the_instance_again,
                upgrade_request_rules,
            }
            validation {
                invalid_identifiers,
                reserved_names,
                execution_credential_refused,
                numeric_ranges,
                time_ranges,
                checkpoint_kind_rules,
                fail_rules,
                origin_kind,
                continue_prefix_reserved,
            }
        }
    };
}

/// Implementation detail of [`conformance_tests!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases {
    (
        make = $make:expr;
        $( $module:ident { $( $case:ident $( = $config:expr )? ),* $(,)? } )*
    ) => {
        $(
            mod $module {
                #[allow(unused_imports)]
                use super::*;
                $(
                    #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
                    async fn $case() {
                        let config: $crate::__turnwise::EngineConfig =
                            $crate::__conformance_config!($($config)?);
                        let made = ($make)(config).await;
                        // `None`: the fixture's service is not there, and it said so.
                        let Some(fixture) = $crate::MaybeFixture::into_fixture(made) else {
                            return;
                        };
                        $crate::$module::$case(fixture).await;
                    }
                )*
            }
        )*
    };
}

/// Implementation detail of [`conformance_tests!`]: a case's config, default when unnamed.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_config {
    () => {
        $crate::__turnwise::EngineConfig::default()
    };
    ($config:expr) => {
        $config
    };
}
