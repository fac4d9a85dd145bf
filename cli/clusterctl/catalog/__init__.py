"""Facts about hardware and software that the rules and the plan need, each with its source.

Data only: GPU models, the driver/CUDA/NCCL compatibility tables, what each OS ships.
Nothing here reads a spec; ``spec``, ``rules`` and ``plan`` all read from here.
"""
