//! The core's records (streams/core/state.py, events.py, effects.py, definition.py), field
//! for field.  Waits and slots are shared (`Rc`) so that the rules can tell "the same
//! record" from "an equal copy" exactly where the Python rules use `is`.

use std::rc::Rc;

macro_rules! str_enum {
    ($name:ident { $($variant:ident = $text:literal),* $(,)? }) => {
        // Each enum mirrors its Python one whole, though not every member or helper is
        // used natively (an undecodable record, say, is refused in Python alone).
        #[allow(dead_code)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name { $($variant),* }
        #[allow(dead_code)]
        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),*];
            pub fn value(self) -> &'static str {
                match self { $($name::$variant => $text),* }
            }
            pub fn parse(text: &str) -> Option<$name> {
                match text { $($text => Some($name::$variant),)* _ => None }
            }
            pub fn index(self) -> usize {
                Self::ALL.iter().position(|v| *v == self).unwrap()
            }
        }
    };
}

str_enum!(TimerKind {
    Reminder = "reminder", Deadline = "deadline", Poll = "poll", Retention = "retention",
    EarlyReply = "early_reply", SendRetry = "send_retry",
});
str_enum!(WaitStatus { Parked = "parked", InReview = "in_review", Suspended = "suspended", Done = "done" });
str_enum!(CommandKind {
    Suspend = "SUSPEND", Resume = "RESUME", Cancel = "CANCEL", Deliver = "DELIVER",
    Review = "REVIEW", Reschedule = "RESCHEDULE", Migrate = "MIGRATE",
});
str_enum!(ResultStatus { Delivered = "delivered", Failed = "failed" });
str_enum!(SendState { Pending = "pending", Delivered = "delivered", Retrying = "retrying", Failed = "failed" });
str_enum!(OutcomeKind { Received = "RECEIVED", Escalated = "ESCALATED", Cancelled = "CANCELLED" });
str_enum!(OutcomeReason {
    ReplyValid = "reply_valid", ReviewAccepted = "review_accepted",
    ReviewCorrected = "review_corrected", Delivered = "delivered", ResultReady = "result_ready",
    DeadlineExhausted = "deadline_exhausted", InvalidReplyEscalated = "invalid_reply_escalated",
    CancelledByOperator = "cancelled_by_operator", SendFailed = "send_failed",
});
str_enum!(ActionKind {
    SendRequest = "SEND_REQUEST", SendReminder = "SEND_REMINDER", RunEscalation = "RUN_ESCALATION",
    ReviewNeeded = "REVIEW_NEEDED", CloseOut = "CLOSE_OUT", Poll = "POLL",
});
str_enum!(RejectReason {
    Unmatched = "unmatched", Late = "late", Duplicate = "duplicate", Undecodable = "undecodable",
    TenantMismatch = "tenant_mismatch", Unacceptable = "unacceptable",
    UnknownDefinition = "unknown_definition", InvalidRequest = "invalid_request",
    InvalidCommand = "invalid_command", Overflow = "overflow", DeadlinePassed = "deadline_passed",
});
str_enum!(DiscardReason {
    StaleTimer = "stale_timer", AlreadySuspended = "already_suspended",
    NotSuspended = "not_suspended", DuplicateResult = "duplicate_result",
    StaleResult = "stale_result", SameVersion = "same_version",
});
str_enum!(Variant {
    SingleChannel = "single-channel", MultiChannel = "multi-channel", FirstValid = "first-valid",
    Probe = "probe", Chained = "chained",
});

pub const PARTY_SEPARATOR: char = '~';
pub const TRACE_HEAD: usize = 4;
pub const TRACE_TAIL: usize = 12;
pub const MAX_HELD_REPLIES: usize = 16;
pub const MAX_REPLY_IDS: usize = 8;
pub const MAX_SENDS: usize = 16;
pub const KEPT_PAYLOAD_BYTES: usize = 64 * 1024;
pub const MAX_CATCH_UP: u32 = 10_000;
pub const DEFAULT_EARLY_REPLY_TTL_MS: i64 = 10 * 60 * 1000;
pub const DEFAULT_RETENTION_MS: i64 = 7 * 24 * 60 * 60 * 1000;
pub const OPERATOR_CHANNEL: &str = "operator";

// The records below are alike in shape with each other and with row.rs's Head and
// handler.rs's Handled (duplicates lists the pairs), deliberately: each declares its
// Python dataclass field for field, and shares no logic with the others.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArmedTimer {
    pub kind: TimerKind,
    pub due_at: i64,
    pub generation: i64,
}

impl ArmedTimer {
    /// `_timer_order`: (due_at, kind's value, generation).
    pub fn order_key(&self) -> (i64, &'static str, i64) {
        (self.due_at, self.kind.value(), self.generation)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Origin {
    pub topic: String,
    pub partition: i64,
    pub offset: i64,
    pub value: Rc<[u8]>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StartWait {
    pub correlation_key: String,
    pub definition: String,
    pub requested_at: i64,
    pub tenant: Option<String>,
    pub payload: Option<String>,
    pub parties: Vec<String>,
    pub deadline: Option<String>,
    /// The W3C trace context the request came with, kept with the wait it parks.
    pub traceparent: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub correlation_key: String,
    pub response_data: String,
    pub tenant: Option<String>,
    pub channel: String,
    pub reply_id: Option<String>,
    pub sent_at: Option<i64>,
    pub origin: Option<Origin>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Command {
    pub correlation_key: String,
    pub command: CommandKind,
    pub reason: Option<String>,
    pub review_outcome: Option<String>,
    pub review_note: Option<String>,
    pub response_data: Option<String>,
    pub operator: Option<String>,
    pub origin: Option<Origin>,
    pub deadline: Option<String>,
    pub move_by: Option<String>,
    pub version: Option<String>,
    /// The bulk operation the command belongs to (streams/core/operations.py).
    pub operation_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ActionResult {
    pub correlation_key: String,
    pub action_id: String,
    pub status: ResultStatus,
    pub error: Option<String>,
    pub permanent: bool,
    pub at: Option<i64>,
    pub origin: Option<Origin>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TimerFired {
    pub wait_key: String,
    pub kind: TimerKind,
    pub due_at: i64,
    pub generation: i64,
}

#[derive(Debug, Clone)]
pub enum Event {
    Start(StartWait),
    Reply(Rc<Reply>),
    Command(Rc<Command>),
    Timer(TimerFired),
    Result(Rc<ActionResult>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct HeldReply {
    pub reply: Rc<Reply>,
    pub received_at: i64,
    pub by_operator: bool,
    pub seq: i64,
    pub operator: Option<String>,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HeldResult {
    pub result: Rc<ActionResult>,
    pub received_at: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HeldCommand {
    pub command: Rc<Command>,
    pub received_at: i64,
    pub seq: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Send {
    pub kind: ActionKind,
    pub stage: i64,
    pub level: i64,
    pub party: Option<String>,
    pub attempt: i64,
    pub tries: i64,
    pub state: SendState,
    pub retry_at: Option<i64>,
    pub error: Option<String>,
}

impl Send {
    pub fn new(kind: ActionKind, stage: i64, level: i64, party: Option<String>, attempt: i64) -> Send {
        Send { kind, stage, level, party, attempt, tries: 1, state: SendState::Pending, retry_at: None, error: None }
    }
    /// A send's identity: kind, stage, level, party, attempt.
    pub fn same_id(&self, other: &Send) -> bool {
        self.kind == other.kind && self.stage == other.stage && self.level == other.level
            && self.party == other.party && self.attempt == other.attempt
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Suspension {
    pub reason: Option<String>,
    pub at: i64,
    pub resume_to: WaitStatus,
    pub remaining: Vec<(TimerKind, i64)>,
    pub operator: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TraceEntry {
    pub at: i64,
    pub event: String,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Wait {
    pub key: String,
    pub definition: String,
    pub tenant: Option<String>,
    pub parked_at: i64,
    pub status: WaitStatus,
    pub payload: Option<String>,
    pub parties: Vec<String>,
    pub deadline_override_ms: Option<i64>,
    pub stage: i64,
    pub level: i64,
    pub stage_reminders: i64,
    pub reminders_sent: i64,
    pub polls: i64,
    pub reviews: i64,
    pub timers: Vec<ArmedTimer>,
    pub suspension: Option<Suspension>,
    pub held: Vec<HeldReply>,
    pub response_data: Option<String>,
    pub response_valid: bool,
    pub validation_issue: Option<String>,
    pub review_outcome: Option<String>,
    pub review_note: Option<String>,
    pub stage_results: Vec<String>,
    pub outcome: Option<OutcomeKind>,
    pub reason: Option<OutcomeReason>,
    pub ended_at: Option<i64>,
    pub reply_ids: Vec<String>,
    pub trace: Vec<TraceEntry>,
    pub trace_dropped: i64,
    pub operator: Option<String>,
    pub operator_reason: Option<String>,
    pub payload_dropped: bool,
    pub sends: Vec<Send>,
    pub held_results: Vec<HeldResult>,
    pub send_error: Option<String>,
    pub definition_version: Option<String>,
}

impl Wait {
    pub fn new(key: String, definition: String, tenant: Option<String>, parked_at: i64) -> Wait {
        Wait {
            key, definition, tenant, parked_at, status: WaitStatus::Parked, payload: None,
            parties: vec![], deadline_override_ms: None, stage: 0, level: 0, stage_reminders: 0,
            reminders_sent: 0, polls: 0, reviews: 0, timers: vec![], suspension: None, held: vec![],
            response_data: None, response_valid: false, validation_issue: None,
            review_outcome: None, review_note: None, stage_results: vec![], outcome: None,
            reason: None, ended_at: None, reply_ids: vec![], trace: vec![], trace_dropped: 0,
            operator: None, operator_reason: None, payload_dropped: false, sends: vec![],
            held_results: vec![], send_error: None, definition_version: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Slot {
    pub wait: Option<Rc<Wait>>,
    pub early_replies: Vec<HeldReply>,
    pub early_timer: Option<ArmedTimer>,
    pub next_generation: i64,
    pub early_commands: Vec<HeldCommand>,
    /// `Slot.traceparent`: the trace of the request that parked the wait (opaque here).
    pub traceparent: Option<String>,
}

impl Slot {
    pub fn empty() -> Slot {
        Slot { wait: None, early_replies: vec![], early_timer: None, next_generation: 1, early_commands: vec![],
               traceparent: None }
    }
    pub fn armed_in_any_order(&self) -> Vec<ArmedTimer> {
        let mut out: Vec<ArmedTimer> = match &self.wait {
            Some(w) => w.timers.clone(),
            None => vec![],
        };
        if let Some(t) = self.early_timer {
            out.push(t);
        }
        out
    }
    /// `armed_timers()` as a set: distinct timers (the order is never relied on).
    pub fn armed_set(&self) -> Vec<ArmedTimer> {
        let mut out: Vec<ArmedTimer> = Vec::new();
        for t in self.armed_in_any_order() {
            if !out.contains(&t) {
                out.push(t);
            }
        }
        out
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct EmitOutcome {
    pub outcome_id: String,
    pub correlation_key: String,
    pub definition: String,
    pub tenant: Option<String>,
    pub outcome: OutcomeKind,
    pub reason: OutcomeReason,
    pub response_data: Option<String>,
    pub response_valid: bool,
    pub validation_issue: Option<String>,
    pub review_outcome: Option<String>,
    pub review_note: Option<String>,
    pub reminders_sent: i64,
    pub escalation_level: i64,
    pub parked_at: i64,
    pub ended_at: i64,
    pub trace: Vec<TraceEntry>,
    pub operator: Option<String>,
    pub operator_reason: Option<String>,
    pub send_error: Option<String>,
    pub definition_version: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EmitAction {
    pub action_id: String,
    pub correlation_key: String,
    pub definition: String,
    pub tenant: Option<String>,
    pub action: ActionKind,
    pub party: Option<String>,
    pub level: i64,
    pub attempt: i64,
    pub payload: Option<String>,
    pub at: i64,
    pub idempotency_key: String,
    pub send_attempt: i64,
}

#[derive(Debug, Clone)]
pub enum Effect {
    Outcome(EmitOutcome),
    Action(EmitAction),
    Arm(ArmedTimer),
    Disarm(ArmedTimer),
    BufferReply { reply: Rc<Reply>, received_at: i64, expires_at: i64 },
    BufferCommand { command: Rc<Command>, received_at: i64, expires_at: i64 },
    Reject { reason: RejectReason, detail: String, reply: Option<Rc<Reply>>, command: Option<Rc<Command>>, result: Option<Rc<ActionResult>> },
    Discard { reason: DiscardReason, detail: String },
    Purge,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ReminderPolicy {
    pub interval_ms: i64,
    pub limit: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EscalationLevel {
    pub target: String,
    pub deadline_ms: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    pub name: String,
    pub deadline_ms: i64,
    pub party: Option<String>,
    pub reminder: Option<ReminderPolicy>,
    pub escalation: Vec<EscalationLevel>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SendFailureRoute {
    Escalate,
    Review,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SendFailurePolicy {
    pub retries: i64,
    pub backoff_ms: i64,
    pub then: SendFailureRoute,
}

#[derive(Debug)]
pub struct Definition {
    pub name: String,
    pub variant: Variant,
    pub stages: Vec<Stage>,
    pub parties: Vec<String>,
    pub invalid_reply_escalate: bool,
    pub early_reply_ttl_ms: i64,
    pub retention_ms: i64,
    pub poll_interval_ms: Option<i64>,
    pub on_send_failure: Option<SendFailurePolicy>,
    pub version: String,
    /// The Python `WaitDefinition` this was read from (the verdict on a reply is Python's).
    pub py: pyo3::Py<pyo3::PyAny>,
}
