"""bench/ir.py: the work of bench/ir.c through pyverbs (bench/run-ir).

    python3 bench/ir.py MODE COUNT [-t]

Debian's python3 with python3-pyverbs (rdma-core's own Python binding): the
same loops as bench/ir.c and bench/ir.lua, written as pyverbs offers them
(a linked RecvWR/SendWR chain made once and posted again and again,
cq.poll(n) returning a list of WC objects, qp.modify(QPAttr, mask)).
"""
import ctypes
import sys
import time

from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.enums import (IBV_ACCESS_LOCAL_WRITE, IBV_QP_ACCESS_FLAGS, IBV_QP_PKEY_INDEX,
                           IBV_QP_PORT, IBV_QP_STATE, IBV_QPS_ERR, IBV_QPS_INIT, IBV_QPS_RESET,
                           IBV_QPT_RC, IBV_SEND_SIGNALED, IBV_WC_SUCCESS, IBV_WR_SEND)
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR
from pyverbs.addr import AHAttr, GlobalRoute

CHAIN, SCHAIN, MSG, WINDOW = 64, 64, 64, 256
WARM = {"recv": 8192, "sendrecv": 2048, "modify": 384, "polltab": 8192}  # as bench/ir.c

mode, count = sys.argv[1], int(sys.argv[2])
timed = "-t" in sys.argv[3:]
assert count > 0 and count % CHAIN == 0

ctx = Context(name="rxe0")
pd = PD(ctx)
mr = MR(pd, WINDOW * MSG, IBV_ACCESS_LOCAL_WRITE)


def make_qp(scq, rcq, sq, rq):
    cap = QPCap(max_send_wr=sq, max_recv_wr=rq, max_send_sge=1, max_recv_sge=1)
    return QP(pd, QPInitAttr(qp_type=IBV_QPT_RC, scq=scq, rcq=rcq, cap=cap))


KEEP = []  # a WR does not keep the next one of its chain alive: this list does


def recv_chain(n, first=0):
    wr = None
    for i in reversed(range(n)):
        sge = SGE(mr.buf + (first + i) * MSG, MSG, mr.lkey)
        wr = RecvWR(wr_id=first + i, num_sge=1, sg=[sge], next_wr=wr)
        KEEP.append(wr)
    return wr


ERR, RESET = QPAttr(qp_state=IBV_QPS_ERR), QPAttr(qp_state=IBV_QPS_RESET)
INIT = QPAttr(qp_state=IBV_QPS_INIT, port_num=1)
INIT.pkey_index = 0
INIT.qp_access_flags = IBV_ACCESS_LOCAL_WRITE
INIT_MASK = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS


class RQ:
    def __init__(self, rq):
        self.cq = CQ(ctx, CHAIN)
        self.qp = make_qp(self.cq, self.cq, 1, rq)
        self.wr = recv_chain(CHAIN)
        self.qp.modify(INIT, INIT_MASK)


def recv_work(r, n):
    qp, cq, wr = r.qp, r.cq, r.wr
    for _ in range(n // CHAIN):
        qp.post_recv(wr)
        if cq.poll(CHAIN)[0] != 0:
            raise RuntimeError("completions on an idle QP")


def modify_work(r, n):
    qp = r.qp
    for _ in range(n // 3):
        qp.modify(ERR, IBV_QP_STATE)
        qp.modify(RESET, IBV_QP_STATE)
        qp.modify(INIT, INIT_MASK)


def polltab_work(r, n):
    qp, cq, wr = r.qp, r.cq, r.wr
    for _ in range(n // CHAIN):
        qp.post_recv(wr)
        qp.modify(ERR, IBV_QP_STATE)
        got = 0
        while got < CHAIN:
            got += cq.poll(CHAIN)[0]
        qp.modify(RESET, IBV_QP_STATE)
        qp.modify(INIT, INIT_MASK)


class Pair:
    def __init__(self):
        self.scq, self.rcq = CQ(ctx, WINDOW), CQ(ctx, WINDOW)
        self.a = make_qp(self.scq, self.rcq, WINDOW, WINDOW)
        self.b = make_qp(self.scq, self.rcq, WINDOW, WINDOW)
        gid = ctx.query_gid(1, 1)
        for q, peer in ((self.a, self.b), (self.b, self.a)):
            attr = QPAttr(qp_state=IBV_QPS_INIT, port_num=1)
            attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE
            attr.dest_qp_num = peer.qp_num
            attr.path_mtu = 3  # IBV_MTU_1024
            attr.max_dest_rd_atomic = 1
            attr.min_rnr_timer = 12
            attr.timeout, attr.retry_cnt, attr.rnr_retry, attr.max_rd_atomic = 14, 7, 7, 1
            gr = GlobalRoute(dgid=gid, sgid_index=1)
            attr.ah_attr = AHAttr(gr=gr, is_global=1, port_num=1)
            q.to_rts(attr)
        self.rings = [recv_chain(CHAIN, c * CHAIN) for c in range(WINDOW // CHAIN)]
        send = None
        for i in reversed(range(SCHAIN)):
            sge = SGE(mr.buf, MSG, mr.lkey)
            send = SendWR(wr_id=i, opcode=IBV_WR_SEND, num_sge=1, sg=[sge], next_wr=send,
                          send_flags=IBV_SEND_SIGNALED if i == SCHAIN - 1 else 0)
            KEEP.append(send)
        self.swr = send
        for wr in self.rings:
            self.b.post_recv(wr)


def poll_ok(cq):
    n, wcs = cq.poll(CHAIN)
    for wc in wcs:
        if wc.status != IBV_WC_SUCCESS:
            raise RuntimeError("wc status %d" % wc.status)
    return n


def sendrecv_work(p, n):
    a, b, scq, rcq, swr, rings = p.a, p.b, p.scq, p.rcq, p.swr, p.rings
    sent = scomp = recvd = reposted = 0
    rposted = WINDOW
    while recvd < n:
        if sent < n and sent - scomp + SCHAIN <= WINDOW and sent + SCHAIN <= rposted:
            a.post_send(swr)
            sent += SCHAIN
        scomp += poll_ok(scq) * SCHAIN
        recvd += poll_ok(rcq)
        while recvd - reposted >= CHAIN:
            b.post_recv(rings[reposted // CHAIN % len(rings)])
            reposted += CHAIN
            rposted += CHAIN
    while scomp < sent:
        scomp += poll_ok(scq) * SCHAIN


works = {"recv": recv_work, "modify": modify_work, "polltab": polltab_work,
         "sendrecv": sendrecv_work}
work = works[mode]
if mode == "sendrecv":
    env = Pair()
elif mode == "recv":
    env = RQ(count + WARM["recv"])
else:
    env = RQ(CHAIN)
work(env, WARM[mode])
# under bench/run-ir's callgrind runs, only what runs inside ir_measured counts
try:
    MEASURED = ctypes.CDLL("build/bench/libmeasure.so").ir_measured
except OSError:
    MEASURED = None
failed = []


def run_job(_):
    try:
        work(env, count)
    except Exception as e:  # ctypes would print and drop it
        failed.append(e)


t0 = time.monotonic()
if MEASURED:
    MEASURED(ctypes.CFUNCTYPE(None, ctypes.c_void_p)(run_job), None)
else:
    run_job(None)
s = time.monotonic() - t0
if failed:
    raise failed[0]
if timed:
    print("TIME pyverbs %s %.6f %d" % (mode, s, count))
