"""Reference channel adapters: what carries xwait's actions to the outside world.

An adapter consumes ``<prefix>.actions`` in a consumer group of its own,
carries each action out, and reports what became of it (an ``ActionResult``,
rule 12 of docs/rules.md) before it commits the action's offset: at least once, so a
crash sends an action again rather than never (actions carry an
``idempotencyKey``, the same for every send attempt of one action, for the
receiving end to drop repeats; ``actionId`` names the send attempt).

``streams.adapter.webhook``: ``xwait adapter webhook`` POSTs each action to
a URL chosen by its definition and kind; ``streams.adapter.sending``: what a
receiver's answer means and when the adapter POSTs again.
"""
