"""The live speed simulator: the wait for the first token, then tokens at the estimated decode speed.

Pure timing, no terminal: `Playback` says when each token appears; `play` drives an injected clock,
sleep and writer, so tests run it without sleeping. A playback longer than `max_seconds` runs
faster, and says so, so that a 2 tok/s CPU plan still ends.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from fitprobe.i18n import N_, _, language, spec

# Words stand in for tokens (a token is about 0.75 English words; one word per token keeps it simple).
SAMPLE = N_("The quick answer is yes: the model fits in memory, and this is how fast it talks. Each word here "
            "stands for one token. The pause before the first word is the prompt being read, the time to first "
            "token. After it the words arrive at the decode speed, one step of the model per token, each step "
            "reading every active weight from memory once. Faster memory means faster words; a longer prompt "
            "means a longer pause.")
WITHOUT_SPACES = ("zh",)  # written without spaces: one character stands for a token
SPINNER = "|/-\\"
DEFAULT_TOKENS, DEFAULT_MAX_SECONDS = 120, 30.0  # `fitprobe simulate`'s run; the HTML report plays the same


@dataclass(frozen=True)
class Playback:
    ttft_s: float
    tokens_per_s: float
    tokens: int
    speedup: float = 1.0

    @classmethod
    def plan(cls, ttft_ms: float | None, tps: float, tokens: int, max_seconds: float) -> "Playback":
        """Real time unless the whole run would exceed max_seconds (then uniformly faster)."""
        if tps <= 0 or tokens <= 0:
            raise ValueError("the simulator needs a positive decode speed and token count")
        ttft = (ttft_ms or 0.0) / 1e3
        total = ttft + tokens / tps
        speedup = max(1.0, total / max_seconds) if max_seconds > 0 else 1.0
        return cls(ttft_s=ttft, tokens_per_s=tps, tokens=tokens, speedup=speedup)

    @property
    def real_seconds(self) -> float:
        """What the run takes at the estimated speed."""
        return self.ttft_s + self.tokens / self.tokens_per_s

    def token_time(self, i: int) -> float:
        """Wall seconds after the start at which token i (0-based) is shown."""
        return (self.ttft_s + (i + 1) / self.tokens_per_s) / self.speedup

    @property
    def first_token_at(self) -> float:
        return self.ttft_s / self.speedup


def sample_tokens() -> tuple[list[str], str]:
    """The sample text in the active language as the tokens the simulator shows, and what goes between two."""
    text = _(SAMPLE)
    if language() in WITHOUT_SPACES:
        return [c for c in text if not c.isspace()], ""
    return text.split(), " "


def summary(label: str, pb: Playback, prompt_tokens: int) -> str:
    """The one line non-TTY and NO_COLOR users get."""
    first = (_("first token after %(seconds)s s (%(prompt)s-token prompt)") % {
        "seconds": spec(pb.ttft_s, ",.2f"), "prompt": spec(prompt_tokens, ",")} if pb.ttft_s
        else _("first token: prefill time not estimated"))
    return _("%(label)s: %(first)s, then %(rate)s tok/s: %(tokens)s tokens in %(seconds)s s") % {
        "label": label, "first": first, "rate": spec(pb.tokens_per_s, ",.1f"), "tokens": spec(pb.tokens, ","),
        "seconds": spec(pb.real_seconds, ",.2f")}


def play(pb: Playback, *, write: Callable[[str], None], sleep: Callable[[float], None],
         clock: Callable[[], float], color: bool = True, tick: float = 0.1) -> None:
    """Animate on a terminal: a spinner with the elapsed wait, then the words as they are decoded."""
    dim, bold, reset = ("\x1b[2m", "\x1b[1m", "\x1b[0m") if color else ("", "", "")
    tokens, between = sample_tokens()
    start = clock()
    frame = 0
    while (elapsed := clock() - start) < pb.first_token_at:
        shown = elapsed * pb.speedup
        write(f"\r{dim}{SPINNER[frame % len(SPINNER)]} " + _("reading the prompt… %(seconds)s s") % {
            "seconds": spec(shown, ".2f").rjust(5)} + f"{reset}\x1b[K")
        frame += 1
        sleep(min(tick, pb.first_token_at - elapsed))
    write(f"\r\x1b[K{dim}" + _("first token after %(seconds)s s") % {"seconds": spec(pb.ttft_s, ",.2f")}
          + f"{reset}\n")
    for i in range(pb.tokens):
        wait = pb.token_time(i) - (clock() - start)
        if wait > 0:
            sleep(wait)
        write(("" if i == 0 else between) + tokens[i % len(tokens)])
    rate = spec(pb.tokens_per_s, ",.1f", "tok/s")
    faster = _(", ") + _("shown %(times)s× faster") % {"times": spec(pb.speedup, ",.1f")} if pb.speedup > 1 else ""
    write(f"\n{bold}" + _("%(tokens)s tokens in %(seconds)s s at %(rate)s") % {
        "tokens": spec(pb.tokens, ","), "seconds": spec(pb.real_seconds, ",.2f"), "rate": rate}
          + f"{faster}{reset}\n")
