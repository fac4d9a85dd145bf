"""Side effects: providers (local Docker nodes, Pulumi stacks), ansible-runner, state and secrets.

Every adapter reports through one event stream (``events.EventBus``); commands choose how
events are shown (live view, plain lines, JSON).
"""
