"""What each participant-link setting is called and what it does, with an example: one text for the
settings page (crowd/forms.py), the API's schema (crowd/api.py) and the check-item picker, so the
three never say different things. The rules themselves live in crowd/services.py (`_validated`)."""

from __future__ import annotations

#: Setting -> (label on the page, help with an example).
LINK_TEXT: dict[str, tuple[str, str]] = {
    "enabled": (
        "Link is on",
        "While off, newcomers are turned away and people already in carry on. "
        "Turn it on once a test run of your own went through, e.g. with PROLIFIC_PID=test-1.",
    ),
    "max_participants": (
        "Participant cap",
        "The most people admitted; later arrivals get the 'no places left' page and its code. "
        "E.g. 40 (the 41st person is turned away). Empty: no cap.",
    ),
    "pid_param": (
        "Participant ID parameter",
        "The URL parameter that carries each person's panel ID; the same ID resumes on any device. "
        "E.g. PROLIFIC_PID (Prolific) or workerId (MTurk).",
    ),
    "study_param": (
        "Study ID parameter",
        "Kept in the mapping CSV beside the panel ID. E.g. STUDY_ID (Prolific) or hitId (MTurk). Empty: not read.",
    ),
    "session_param": (
        "Session ID parameter",
        "Kept in the mapping CSV too. E.g. SESSION_ID (Prolific) or assignmentId (MTurk). Empty: not read.",
    ),
    "consent": (
        "Consent (Markdown)",
        "Shown first; people tick 'I agree' before anything else. E.g. 'You will label 20 claims "
        "(about 15 minutes). Answers are stored under a pseudonym; you may withdraw at any time.'",
    ),
    "items_per_participant": (
        "Items per participant",
        "Answers that complete a session (check items not counted). E.g. 20.",
    ),
    "budget_minutes": (
        "Time budget (active minutes)",
        "Completes a session instead of, or beside, the quota: it ends after the item during which the "
        "person's active time reaches it. E.g. 30. Empty: none.",
    ),
    "qualification_items": (
        "Qualification items",
        "Gold items answered before any item; the pass mark decides who goes on. E.g. 4 clear-cut items.",
    ),
    "qualification_pass": (
        "Correct answers to pass",
        "Qualification answers that must match gold; fewer screens the person out. E.g. 3 (of 4 items). "
        "0: everyone passes (their answers are kept).",
    ),
    "attention_items": (
        "Attention-check items",
        "Gold items shown between the items, each at most once per person. E.g. 3 items with an obvious answer.",
    ),
    "attention_every": (
        "A check after every k items",
        "E.g. 5 with 20 items per participant: checks after items 5, 10 and 15 (none after the last). 0: no checks.",
    ),
    "attention_fail_limit": (
        "Failed checks that screen out",
        "Attention checks failed before the session ends as screened out. E.g. 2.",
    ),
    "time_limit_minutes": (
        "Time limit (minutes)",
        "From arrival; once past, the session ends as timed out and its items go back. "
        "E.g. 60, a little above the panel's own limit.",
    ),
    "code_completed": (
        "Code: completed",
        "Shown, and put in the redirect, when someone finishes. E.g. C1A2B3C4, the panel's completion code.",
    ),
    "code_screened_out": (
        "Code: screened out",
        "For a failed qualification or too many failed checks. E.g. SCREEN01, a code the panel pays "
        "a fixed amount for or asks you to review.",
    ),
    "code_timed_out": (
        "Code: timed out",
        "For a session past the time limit. E.g. TIMEOUT1.",
    ),
    "code_full": (
        "Code: no places left",
        "For arrivals after the participant cap. E.g. NOPLACES, a code the panel knows as 'returned'.",
    ),
    "redirect_url": (
        "Redirect URL",
        "Where people go back with their code; {code} is replaced. "
        "E.g. https://app.prolific.com/submissions/complete?cc={code}. Empty: the code is shown, no redirect.",
    ),
    "pay_per_hour": (
        "Pay per hour",
        "Your rate in the currency below, for the time chosen under 'Pay by'. E.g. 9.00.",
    ),
    "currency": (
        "Currency",
        "ISO 4217 code of the rate, shown in the payment table, the summary and the CSV. E.g. GBP, USD, EUR.",
    ),
    "pay_basis": (
        "Pay by",
        "Active time: what the pages measured on items and checks. Wall time: from arrival to the end, "
        "consent, instructions and questionnaires included (closer to what a panel counts). "
        "Both columns are kept; the pay column follows this choice. E.g. wall time, as a panel counts time taken.",
    ),
}


def label(name: str) -> str:
    return LINK_TEXT[name][0]


def help_text(name: str) -> str:
    return LINK_TEXT[name][1]
