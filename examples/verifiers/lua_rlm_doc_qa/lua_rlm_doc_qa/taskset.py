"""The tasks: each a document, written into the rollout's work folder (the agent's
session studies its working directory), a question about it, and the answer."""

from __future__ import annotations

import verifiers.v1 as vf

#: Where each task's document is written, in the runtime's work folder.
DOCUMENT = "document.txt"

_LOG = "\n".join(
    [
        "2026-03-01 10:00:01 INFO  gateway   request served",
        "2026-03-01 10:00:02 ERROR gateway   upstream timeout",
        "2026-03-01 10:00:03 INFO  billing   invoice 1182 sent",
        "2026-03-01 10:00:04 ERROR billing   card declined",
        "2026-03-01 10:00:05 ERROR gateway   upstream timeout",
        "2026-03-01 10:00:06 INFO  search    index rebuilt",
        "2026-03-01 10:00:07 ERROR gateway   502 from billing",
    ]
)

_INVENTORY = "\n".join(
    [
        "sku,name,stock",
        "A-100,anchor bolt,42",
        "B-220,bracket,0",
        "C-310,cable tie,1250",
        "D-040,dowel,7",
    ]
)

#: (document, question, answer): the answer is one word or number, compared exactly.
ROWS = [
    (_LOG, "Which service logged the most ERROR lines? Answer with its name only.", "gateway"),
    (_LOG, "How many ERROR lines are there? Answer with the number only.", "4"),
    (_INVENTORY, "Which item (its name) is out of stock? Answer with the name only.", "bracket"),
]


class DocQAData(vf.TaskData):
    """One row: the document and the expected answer (the question is the prompt)."""

    document: str
    answer: str


class DocQATask(vf.Task[DocQAData]):
    async def setup(self, trace: vf.Trace, runtime: vf.Runtime) -> None:
        await runtime.write(DOCUMENT, self.data.document.encode())

    @vf.reward(weight=1.0)
    async def exact_match(self, trace: vf.Trace) -> float:
        """1 when the reply is the answer, case and surrounding space aside."""
        reply = (trace.root_reply or "").strip().strip(".").lower()
        return float(reply == self.data.answer.lower())


class DocQAConfig(vf.TasksetConfig):
    pass


class DocQATaskset(vf.Taskset[DocQATask, DocQAConfig]):
    def load(self) -> list[DocQATask]:
        return [
            DocQATask(
                DocQAData(
                    name=f"doc-qa-{index}",
                    prompt=f"{question} The document is the file {DOCUMENT} in your context.",
                    document=document,
                    answer=answer,
                ),
                self.config.task,
            )
            for index, (document, question, answer) in enumerate(ROWS)
        ]
