"""fio as iorig drives it: job files through a whitelist, processes in their
own group, its output parsed, and the hosts it runs on (SSH, agents, TLS)."""
