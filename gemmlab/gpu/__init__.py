"""GPU side of the measuring core: device facts, the timer, NVML clocks, the executor."""
