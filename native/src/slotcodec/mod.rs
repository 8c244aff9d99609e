//! The stored slot (streams/core/state_codec.py): read from its JSON, written byte for
//! byte as `encode_slot` writes it with orjson.  Reading is strict where Python's is
//! lenient (`int("5")`): a slot this writer would not have written is left to Python.

mod read;
mod write;

pub use read::decode_slot;
pub use write::encode_slot;

use crate::model::*;
use crate::oracle::{decline, R};

pub(super) fn kind_short(k: TimerKind) -> &'static str {
    match k {
        TimerKind::Reminder => "r",
        TimerKind::Deadline => "d",
        TimerKind::Poll => "p",
        TimerKind::Retention => "x",
        TimerKind::EarlyReply => "e",
        TimerKind::SendRetry => "s",
    }
}

pub(super) fn kind_back(s: &str) -> R<TimerKind> {
    Ok(match s {
        "r" => TimerKind::Reminder,
        "d" => TimerKind::Deadline,
        "p" => TimerKind::Poll,
        "x" => TimerKind::Retention,
        "e" => TimerKind::EarlyReply,
        "s" => TimerKind::SendRetry,
        _ => return decline("timer kind"),
    })
}

pub(super) fn send_kind_short(k: ActionKind) -> R<&'static str> {
    Ok(match k {
        ActionKind::SendRequest => "q",
        ActionKind::SendReminder => "m",
        ActionKind::RunEscalation => "x",
        _ => return decline("send kind"),
    })
}

pub(super) fn send_kind_back(s: &str) -> R<ActionKind> {
    Ok(match s {
        "q" => ActionKind::SendRequest,
        "m" => ActionKind::SendReminder,
        "x" => ActionKind::RunEscalation,
        _ => return decline("send kind"),
    })
}

pub(super) fn send_state_short(s: SendState) -> &'static str {
    match s {
        SendState::Pending => "p",
        SendState::Delivered => "d",
        SendState::Retrying => "r",
        SendState::Failed => "f",
    }
}

pub(super) fn send_state_back(s: &str) -> R<SendState> {
    Ok(match s {
        "p" => SendState::Pending,
        "d" => SendState::Delivered,
        "r" => SendState::Retrying,
        "f" => SendState::Failed,
        _ => return decline("send state"),
    })
}
