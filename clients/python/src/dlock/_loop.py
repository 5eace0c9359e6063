"""An event loop in a daemon thread: the blocking API runs the asyncio core
there, so that every call it makes can be given up at a deadline."""
from __future__ import annotations

import asyncio
import threading
from typing import Any, Awaitable, Dict, Optional, TypeVar

T = TypeVar("T")


class LoopThread:
    def __init__(self, name: str):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Awaitable[T]) -> T:
        """Run coro in the loop and wait for it.  If the waiting thread is
        interrupted (KeyboardInterrupt), coro is cancelled and its clean-up
        awaited (up to 15 s) before the interruption goes on."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("dlock: not from the on_lost callback (it runs in the lease's own thread)")
        done = threading.Event()
        box: Dict[str, Any] = {}
        task: Dict[str, Optional[asyncio.Task[None]]] = {"t": None}

        async def runner() -> None:
            try:
                box["r"] = await coro
            except BaseException as exc:  # handed to the waiting thread
                box["e"] = exc
            finally:
                done.set()

        def start() -> None:
            task["t"] = self.loop.create_task(runner())

        self.loop.call_soon_threadsafe(start)
        try:
            done.wait()
        except BaseException:
            def cancel() -> None:
                t = task["t"]
                if t is not None:
                    t.cancel()
            self.loop.call_soon_threadsafe(cancel)
            done.wait(15)
            raise
        if "e" in box:
            raise box["e"]
        return box["r"]  # type: ignore[no-any-return]

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        if threading.current_thread() is not self._thread:
            self._thread.join(15)
            if not self._thread.is_alive():
                self.loop.close()
