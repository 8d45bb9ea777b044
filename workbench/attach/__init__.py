"""Recording an unmodified program: `workbench record -- CMD ARGS...`.

Small C shims of ours (built on first use, build.py) are loaded into the program through its
documented hooks: LD_PRELOAD for pthread mutexes, condition variables and semaphores,
NVTX_INJECTION64_PATH for NVTX ranges and names, CUDA_INJECTION64_PATH for CUPTI activity.
They write fixed-size events into a shared-memory ring (ring.h, ring.py) that the recorder
drains while the program runs (session.py) into spans on the track grammar (convert.py).
"""
