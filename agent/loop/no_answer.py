"""A reply that is no answer, and what the loop says back: an empty reply, one that only
echoes our data markers, a tool result the model wrote itself, calls offered as
alternatives, a reply cut short, calls repeated after they were done. Small models do each
of these; the loop (agent.loop.react) notices them, nudges the model once, then ends the
run with what its calls did.

Pure functions of the reply's text and of what the run's calls did, so they are read and
tested apart from the loop that holds that state.

May import: the loop's own modules, tools, model, common (the loop layer and below).
"""

from __future__ import annotations

from agent.common.errors import ModelError
from agent.loop.textcalls import CHOICES_MARK
from agent.model.model_types import ChatModel, Reply
from agent.tools.results import envelope, without_envelope_tags

NUDGE_REQUEST_LIMIT = 2000  # characters of the request restated after an empty reply
ANSWER_NOW = (
    "(The calls you repeated were already done; their results are above. No tools now: "
    "answer the request from those results, in plain words.)"
)
DONE_SOURCE = "the calls you made"  # the envelope's name for the list of what succeeded
FAKE_RESULT = "<tool_response>"  # a result block a model wrote itself (Hermes' own markup)
EMPTY_NOTICE = "the model returned an empty reply; asking it to continue"
FAKED_NOTICE = "the model wrote a tool result itself instead of calling the tool"
CHOICES_NOTICE = "the model offered calls as alternatives; none ran, asking it to choose one"


def no_answer(content: str) -> str | None:
    """Why a reply without calls is not an answer (None: it is one): it is empty, or only
    our data markers echoed back (EMPTY_NOTICE), a tool result the model wrote itself
    (FAKED_NOTICE), or calls offered as alternatives (CHOICES_NOTICE)."""
    words = without_envelope_tags(content).strip()
    if not words:
        return EMPTY_NOTICE
    if words.startswith(FAKE_RESULT):  # a reply that opens as a result, not one about them
        return FAKED_NOTICE
    if CHOICES_MARK in words:  # calls offered as options: it must pick one (textcalls)
        return CHOICES_NOTICE
    return None


def empty_reply_nudge(notice: str, done: list[str], request: str) -> str:
    """The nudge after a reply that is no answer (`notice` says why not). When calls already
    succeeded (`done`) it says what was done (restating the request then reads as a new
    order: after three writes a small model answered with instructions to run `echo`); else
    it restates the request (a small model answers the last user message alone)."""
    why = {
        FAKED_NOTICE: "Your last reply wrote a tool result itself; results come only from "
        "calling tools.",
        CHOICES_NOTICE: "Your last reply offered several calls as alternatives, and none "
        "ran. Choose one and call it alone.",
    }.get(notice, "Your last reply was empty.")
    if done:
        # Marked as data: the arguments may carry text the model copied from a tool
        # result, and this message speaks with the user's role.
        listing = envelope(DONE_SOURCE, "\n".join(done))
        return (
            f"({why} Done so far in this request:\n{listing}\nIf that completes the "
            "request, reply with a short answer for the user; otherwise call the next tool.)"
        )
    if len(request) > NUDGE_REQUEST_LIMIT:
        request = request[:NUDGE_REQUEST_LIMIT] + " [...]"
    return f"({why} Answer this request, or call a tool for it:)\n{request}"


def ending(done: list[str]) -> str:
    """The answer of a run whose model twice gave no answer: what its calls did, or an
    error when they did nothing (one nudge is enough; more only repeat the silence)."""
    if not done:
        raise ModelError(
            "the model returned no answer twice (empty replies); try rephrasing the "
            "request, or a larger model"
        )
    listing = "\n".join(done)
    return f"The model ended without an answer. Done in this request:\n{listing}"


def cut_short(model: ChatModel, reply: Reply) -> str:
    """Why a reply ended with finish_reason "length": our max_tokens, or the server."""
    limit = getattr(model, "max_tokens", None)
    if limit is None:
        return "the answer was cut short by the server (its context or output limit)"
    if reply.usage.known and reply.usage.completion_tokens < limit:
        return "the answer was cut short by the server's context limit"
    return f"the answer was cut by the max_tokens limit ({limit}; max_tokens in [llm])"
