"""Drive a turnwise server with the public Little Big Brain client (littlebigbrain==0.32.0).

Defines a `counter` workflow with a step, a short sleep, a signal wait and a continuation,
starts an instance, sends one message, answers the signal wait from the app side with
`handle.signal`, and serves the turns with `WorkflowWorker` until both turns are done.
Prints one JSON line with what the client saw; the Rust test then checks the server's own view.

Usage: counter_worker.py URL TOKEN GRAPH
"""

import asyncio
import json
import sys
import time

from lbb import AsyncLbbClient
from lbb.workflows import WorkflowContext, WorkflowResult, WorkflowWorker, workflow

DEADLINE_S = 90


@workflow(name="counter", version="v1", initial_state={"count": 0})
async def counter(ctx: WorkflowContext, state: dict, message: dict) -> WorkflowResult[dict]:
    amount = await ctx.step("add", lambda s: message["add"])
    total = state["count"] + amount
    await ctx.sleep("cool-down", 200)
    if message.get("ask"):
        answer = await ctx.wait_for_signal("approval", name="approval", timeout_ms=60_000)
        if not answer.received or not answer.value.get("approved"):
            return WorkflowResult(state=state, result="rejected")
    if message.get("then") is not None:
        return ctx.continue_({"count": total}, message["then"], result={"continued": total})
    return WorkflowResult(state={"count": total}, result=total)


def word(value):
    """An enum member's wire value, or the value itself."""
    return getattr(value, "value", value)


async def wait_for(what, check, deadline):
    while time.monotonic() < deadline:
        value = await check()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise TimeoutError(f"timed out waiting for {what}")


async def main(url: str, token: str, graph: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    async with AsyncLbbClient(url, api_key=token, graph=graph) as client:
        handle = await counter.start(client, "counter-1")
        # The same start again is answered with the instance it created.
        handle = await counter.start(client, "counter-1")
        sent = await handle.send({"add": 2, "ask": True, "then": {"add": 3}}, id="request-1")
        again = await handle.send({"add": 2, "ask": True, "then": {"add": 3}}, id="request-1")
        assert again.number == sent.number == 1, (sent, again)

        worker = WorkflowWorker(
            client, [counter], worker="py-worker", claim_wait_ms=2_000, drain_seconds=5
        )
        serving = asyncio.ensure_future(worker.run_async())
        try:

            async def suspended_on_signal():
                inst = await handle.status()
                turn = inst.current_turn
                if turn is None or word(turn.status) != "waiting":
                    return None
                return any(s.key == "approval" and word(s.kind) == "signal" for s in turn.steps)

            await wait_for("the signal wait", suspended_on_signal, deadline)
            signalled = await handle.signal("approval", {"approved": True}, turn=1, id="approval-1")
            # Delivered once: the same event id again is the same receipt.
            await handle.signal("approval", {"approved": True}, turn=1, id="approval-1")

            async def finished():
                inst = await handle.status()
                return inst if inst.completed_turns == 2 and inst.pending_messages == 0 else None

            inst = await wait_for("both turns", finished, deadline)
            history = await handle.history()
            inbox = await handle.inbox()
        finally:
            worker.stop(drain_seconds=0)
            await asyncio.wait_for(serving, 30)

    print(
        json.dumps(
            {
                "state": inst.state,
                "status": word(inst.status),
                "completed_turns": inst.completed_turns,
                "history": [
                    {
                        "number": t.number,
                        "status": word(t.status),
                        "result": t.result,
                        "steps": [s.key for s in t.steps],
                    }
                    for t in history.turns
                ],
                "inbox_pending": inbox.pending_messages,
                "signal_turn_status": word(signalled.status),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
