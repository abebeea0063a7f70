"""Examples of code captured as it is: a hand-written loop journaled through `capture.Recorder`.

`capture.examples.plain_loop` is trusted by default (`agentloop.DEFAULT_TRUSTED`), so its
sessions replay from the CLI with no configuration, like the agentloop example agents.
"""
