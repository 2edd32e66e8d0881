"""Everyday Python a learner may run: each must end "ok" in the sandbox.

The seccomp allow list (runner/seccomp.py) is derived from tracing these with the lessons' code
(bench/seccomp_trace.py), and tests/test_runner_pool.py runs every one of them under it.
"""

from __future__ import annotations

EVERYDAY: dict[str, str] = {
    "print": "print('hello', 1 + 1)",
    "stdlib": (
        "import math, json, random, statistics, fractions, decimal, itertools\n"
        "print(math.sqrt(2), json.dumps({'a': [1, 2]}), random.random(), statistics.mean([1, 2, 3]))\n"
        "print(fractions.Fraction(1, 3), decimal.Decimal('1.1') * 3, list(itertools.permutations('ab')))"
    ),
    "time": (
        "import time, datetime\nt = time.perf_counter()\ntime.sleep(0.05)\n"
        "print(time.time() > 0, datetime.datetime.now().year > 2000, time.perf_counter() - t > 0)"
    ),
    "files": (
        "import os, pathlib, shutil, tempfile\nopen('a.txt', 'w').write('x' * 1000)\nprint(open('a.txt').read()[:3])\n"
        "p = pathlib.Path('/tmp/d')\np.mkdir()\n(p / 'f').write_bytes(b'1')\nshutil.copy2('a.txt', '/tmp/d/b.txt')\n"
        "os.symlink('/tmp/d/f', 'link')\nos.chmod('a.txt', 0o600)\nos.utime('a.txt')\nos.mkfifo('/tmp/fifo')\n"
        "print(sorted(os.listdir('/tmp/d')), os.stat('a.txt').st_size, os.getcwd(), os.readlink('link'))\n"
        "os.rename('a.txt', 'c.txt')\nos.remove('c.txt')\nshutil.rmtree('/tmp/d')\n"
        "with tempfile.TemporaryDirectory() as d:\n    print(os.path.isdir(d))\n"
        "with tempfile.NamedTemporaryFile() as f:\n    f.write(b'abc')\n    f.flush()\n    os.fsync(f.fileno())\n"
        "print(os.statvfs('.').f_bsize > 0)"
    ),
    "threads": (
        "import threading\nout = []\nts = [threading.Thread(target=out.append, args=(i,)) for i in range(4)]\n"
        "[t.start() for t in ts]\n[t.join() for t in ts]\nprint(sorted(out))"
    ),
    "thread_pool": (
        "import concurrent.futures as cf\nwith cf.ThreadPoolExecutor(2) as ex:\n    print(list(ex.map(abs, [-1, -2])))"
    ),
    "forked_pool": (
        "import multiprocessing as mp\nif __name__ == '__main__':\n    with mp.get_context('fork').Pool(2) as p:\n"
        "        print(p.map(abs, [-1, -2, -3]))"
    ),
    "fork": "import os\npid = os.fork()\nif pid == 0:\n    os._exit(3)\nprint(os.waitpid(pid, 0)[1] >> 8)",
    "subprocess": (
        "import subprocess, sys\nprint(subprocess.run([sys.executable, '-c', 'print(7)'], capture_output=True).stdout)"
    ),
    "stderr": "import sys\nprint('err', file=sys.stderr)",
    "encodings": (
        "import hashlib, base64, zlib, re, string, struct, io\n"
        "print(hashlib.sha256(b'x').hexdigest()[:8], base64.b64encode(b'x'), len(zlib.compress(b'x' * 100)),\n"
        "      re.sub('a', 'b', 'aa'), string.ascii_letters[:3], struct.pack('>I', 1), io.StringIO('x').read())"
    ),
    "autograd": (
        "import torch\nx = torch.randn(64, 64, requires_grad=True)\ny = (x @ x).relu().sum()\ny.backward()\n"
        "print(x.grad.shape, torch.get_num_threads(), torch.__version__)"
    ),
    "training": (
        "import torch, io\nm = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))\n"
        "opt = torch.optim.SGD(m.parameters(), lr=0.1)\nfor _ in range(3):\n    opt.zero_grad()\n"
        "    loss = m(torch.randn(16, 4)).pow(2).mean()\n    loss.backward()\n    opt.step()\n"
        "buf = io.BytesIO()\ntorch.save(m.state_dict(), buf)\nbuf.seek(0)\nm.load_state_dict(torch.load(buf))\n"
        "torch.save(m, 'model.pt')\nprint(type(torch.load('model.pt', weights_only=False)).__name__)"
    ),
    "no_grad": "import torch\nwith torch.no_grad():\n    print(torch.linspace(0, 1, 5) * 2)",
    "data_loader": (
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n"
        "dl = DataLoader(TensorDataset(torch.arange(10.0)), batch_size=4)\nprint([b[0].tolist() for b in dl])"
    ),
    "functional": "import torch.nn.functional as F, torch\nprint(F.softmax(torch.tensor([1.0, 2.0]), dim=0))",
    "sympy": "import sympy\nprint(sympy.diff(sympy.Symbol('x') ** 3))",
    "signals": (
        "import os, signal, time\nsignal.signal(signal.SIGALRM, lambda *a: print('alarm'))\n"
        "signal.setitimer(signal.ITIMER_REAL, 0.01)\ntime.sleep(0.05)\n"
        "print(os.getpid(), os.getppid(), os.getuid(), os.cpu_count(), os.sched_getaffinity(0))"
    ),
    "platform": (
        "import locale, platform, sys, os\n"
        "print(locale.getpreferredencoding(), platform.python_version(), sys.platform,\n"
        "      os.uname().sysname, os.environ.get('HOME'))"
    ),
    "resources": (
        "import resource\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss > 0, resource.getrlimit(resource.RLIMIT_NOFILE))"
    ),
    "unix_sockets": (
        "import select, socket\na, b = socket.socketpair()\na.send(b'x')\n"
        "print(select.select([b], [], [], 1)[0] != [], b.recv(1))"
    ),
    "asyncio": (
        "import asyncio\nasync def main():\n    await asyncio.sleep(0.01)\n    return 5\nprint(asyncio.run(main()))"
    ),
    "mmap": "import mmap\nm = mmap.mmap(-1, 4096)\nm.write(b'hi')\nprint(m[:2])",
    "big_list": "x = [i * i for i in range(10**6)]\nprint(sum(x))\nimport gc\ngc.collect()",
    "warnings": "import warnings\nwarnings.warn('careful')\nprint('after')",
    "logging": "import logging\nlogging.basicConfig()\nlogging.getLogger('x').warning('w')",
    "introspection": (
        "import inspect, dis, traceback\nprint(inspect.signature(print), len(list(dis.get_instructions(lambda: 1))))\n"
        "try:\n    1 / 0\nexcept ZeroDivisionError:\n    print(traceback.format_exc().splitlines()[-1])"
    ),
    "memfd_and_fcntl": (
        "import os, fcntl\nfd = os.memfd_create('x', os.MFD_ALLOW_SEALING)\nos.write(fd, b'abc')\n"
        "fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE)\nflags = fcntl.fcntl(fd, fcntl.F_GETFL)\n"
        "fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)\nr, w = os.pipe()\n"
        "print(fcntl.fcntl(fd, fcntl.F_GET_SEALS), fcntl.fcntl(r, fcntl.F_GETPIPE_SZ) > 0, os.get_inheritable(fd))"
    ),
}
