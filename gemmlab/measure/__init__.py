"""Measuring a point: its inputs and the element-wise check (check), the CPU and GPU executors (cpu,
gpu), the GPU timer with its NVML and CUPTI readings (timer, nvml, cupti), hardware counters
(counters), the statistics of the samples (stats), and whether a row can be trusted (validity)."""
