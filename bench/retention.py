"""Benchmark of the retention pieces' CPU cost, each against a peer measured in the same run.

    python bench/retention.py [--quick]

Prints one JSON object:

  review_us / fsrs_us / review_ratio   one review through bot.retention.review (row in, row and log entry out,
                                       seeded fuzz) against FSRS's own Scheduler.review_card on a Card
  plan_us / sort_us / plan_ratio       a learner's habit from four weeks of activity plus their next reminder,
                                       against sorting the same activity (the least a sweep does with it)
  plans_per_s                          reminders planned per second on one core (100,000 learners: seconds)
  card_ms / plain_card_ms / card_ratio a completion card as PNG (en, ar, ja averaged) against the same lines
                                       drawn in one font each, no fallback or bidi runs, also as PNG
  sender_per_s / sender_cpu_us         10,000 messages drained on virtual time: the pace reached (Telegram's
                                       limit is 30) and the sender's own CPU per message

No target is asserted: the issue's sweep and database figures come with storage (bench/reminders.py).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import heapq
import io
import itertools
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fsrs import Card, Rating, Scheduler
from PIL import Image, ImageDraw

from bot.i18n import I18n
from bot.retention import completion_card, reminders, review, textline
from bot.retention.bulk_sender import BulkSender, Delivery, LocalBudget, Sent
from bot.retention.review import CardKey, ItemKind

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOW = dt.datetime(2026, 3, 10, 12, 0, tzinfo=dt.UTC)


def per_call_us(work: Callable[[], object], repeat: int) -> float:
    """Return the median CPU microseconds of one call, over ``repeat`` batches."""
    samples = []
    for _ in range(repeat):
        start = time.process_time()
        for _ in range(50):
            work()
        samples.append((time.process_time() - start) / 50 * 1e6)
    return statistics.median(samples)


def bench_review(repeat: int) -> dict[str, float]:
    card, _ = review.meet(7, CardKey("grad", ItemKind.QUESTION, "q1"), True, NOW)
    for _ in range(3):
        card, _ = review.review(card, True, card.due_at)
    row = card.columns()
    at = card.due_at
    plain = Scheduler(learning_steps=(), relearning_steps=(), maximum_interval=365)
    fsrs_card = Card(
        card_id=1,
        state=card.fsrs_card().state,
        step=None,
        stability=card.stability,
        difficulty=card.difficulty,
        due=at,
        last_review=card.fsrs_card().last_review,
    )

    def ours() -> object:
        return review.review(review.ReviewCard.from_columns(row), True, at)[0].columns()

    mine = per_call_us(ours, repeat)
    peer = per_call_us(lambda: plain.review_card(fsrs_card, Rating.Good, at), repeat)
    return {"review_us": round(mine, 1), "fsrs_us": round(peer, 1), "review_ratio": round(mine / peer, 2)}


def bench_plan(repeat: int) -> dict[str, float]:
    rng = random.Random(1)
    activity = [
        NOW - dt.timedelta(days=day, minutes=rng.randint(-40, 40) - 19 * 60 + m * 5)
        for day in range(1, 29)
        if rng.random() < 0.7
        for m in range(6)
    ]

    def plan() -> object:
        habit = reminders.habit(activity, NOW)
        return reminders.next_reminder(7, habit, waits_from=NOW, last_reminder=None, now=NOW)

    mine = per_call_us(plan, repeat)
    peer = per_call_us(lambda: sorted(activity), repeat)
    return {
        "plan_us": round(mine, 1),
        "sort_us": round(peer, 2),
        "plan_ratio": round(mine / peer, 1),
        "plans_per_s": round(1e6 / mine),
        "activity_per_learner": len(activity),
    }


def bench_card(repeat: int) -> dict[str, float]:
    i18n = I18n(os.path.join(ROOT, "locales"))
    cases = [
        ("en", "PyTorch autograd", "Ada"),
        ("ar", "الاشتقاق التلقائي (autograd) في PyTorch", "سامي"),
        ("ja", "PyTorch autograd", "さくら"),
    ]
    day = dt.date(2026, 12, 4)

    def ours() -> object:
        for language, title, name in cases:
            with i18n.use(language):
                completion_card.completion_card(title, name, day, 4, "t.me/autograd_course_bot")
        return None

    drawn = []
    for language, title, name in cases:
        with i18n.use(language):
            drawn.append(completion_card.draw_card(title, name, day, 4, "t.me/autograd_course_bot")[1])

    def plain() -> object:
        # The peer draws the same lines at the same places, each in its first run's font, with no fallback,
        # no bidi runs and no fitting: what a card costs Pillow itself.
        for lines in drawn:
            image = Image.new("RGB", (completion_card.WIDTH, completion_card.HEIGHT), completion_card.PAPER)
            canvas = ImageDraw.Draw(image)
            for line in lines:
                font = textline.truetype(line.runs[0].run.font, line.size)
                canvas.text((line.left, line.baseline), line.text, font=font, fill=line.fill, anchor="ls")
            image.save(io.BytesIO(), format="PNG", optimize=True)
        return None

    ours()  # fonts and character maps loaded once, as in a running bot
    samples_ours, samples_plain = [], []
    for _ in range(max(1, repeat // 5)):
        start = time.process_time()
        ours()
        samples_ours.append((time.process_time() - start) / len(cases) * 1e3)
        start = time.process_time()
        plain()
        samples_plain.append((time.process_time() - start) / len(cases) * 1e3)
    mine, peer = statistics.median(samples_ours), statistics.median(samples_plain)
    return {"card_ms": round(mine, 1), "plain_card_ms": round(peer, 1), "card_ratio": round(mine / peer, 2)}


async def bench_sender(count: int) -> dict[str, float]:
    now = [0.0]
    sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
    order = itertools.count()

    async def sleep(seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(sleepers, (now[0] + seconds, next(order), future))
        await future

    async def send(item: int) -> Delivery:
        return Sent()

    sender = BulkSender(send, LocalBudget(), lambda: now[0], sleep)
    start = time.process_time()
    task = asyncio.ensure_future(sender.drain(range(count)))
    while not task.done():
        for _ in range(5):
            await asyncio.sleep(0)
        if sleepers:
            wake, _, future = heapq.heappop(sleepers)
            now[0] = max(now[0], wake)
            future.set_result(None)
    cpu = time.process_time() - start
    report = task.result()
    span = report.sent_at[-1] - report.sent_at[0]
    return {"sender_per_s": round((report.sent - 1) / span, 2), "sender_cpu_us": round(cpu / count * 1e6, 1)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer repetitions, for the smoke test")
    args = parser.parse_args()
    repeat = 5 if args.quick else 30
    result: dict[str, object] = {"quick": args.quick}
    result.update(bench_review(repeat))
    result.update(bench_plan(repeat))
    result.update(bench_card(repeat))
    result.update(asyncio.run(bench_sender(1_000 if args.quick else 10_000)))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
