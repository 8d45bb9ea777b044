"""The run: partition queue, synthesis pool, GPU workers, memory modes."""
