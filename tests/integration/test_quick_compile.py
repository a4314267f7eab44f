"""The CLI's JVM compiles quickly for small clusters: the size comes from ZooKeeper before Spark starts."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from pyspark.sql import SparkSession

from generated import generated_cluster
from ledgerlens.runtime.preflight import preflight, znode_count, zookeeper_client
from ledgerlens.runtime.spark import (
    LEAN_INLINING,
    QUICK_COMPILE,
    QUICK_COMPILE_ZNODES,
    THROUGHPUT_GC,
    configure,
    quick_compile_for,
    quick_compiled_tools,
)
from ledgerlens.settings.config import ZooKeeperSource
from ledgerlens_sandbox.cluster import default_now_ms

pytestmark = [pytest.mark.integration]


def _znodes_under(client: Any, path: str) -> int:
    children = client.get_children(path)
    return 1 + sum(_znodes_under(client, f"{path.rstrip('/')}/{c}") for c in children)


def test_preflight_reads_how_many_znodes_the_store_holds(zookeeper: Any, s3_server: Any) -> None:
    from kazoo.client import KazooClient

    c = generated_cluster(zookeeper, s3_server, "quick", now_ms=default_now_ms(), scenario="healthy")
    writer = KazooClient(hosts=zookeeper.hosts)
    writer.start()
    client = zookeeper_client(ZooKeeperSource(hosts=zookeeper.hosts))
    try:
        before = znode_count(client)
        seen = preflight(ZooKeeperSource(hosts=c["hosts"]), None)
        extra = f"/quick-count-{uuid.uuid4().hex[:8]}"
        for path in (extra, *(f"{extra}/{i}" for i in range(5))):
            writer.create(path)
        after = znode_count(client)
        ours = _znodes_under(client, c["hosts"][len(zookeeper.hosts) :])
    finally:
        client.stop()
        client.close()
        writer.stop()
        writer.close()
    assert before is not None and after == before + 6  # the server's count follows its znodes
    # the whole server's (every chroot, a shared one too): an upper bound of the cluster's inventory
    assert seen["znodes"] == before > ours > 100


def test_two_stores_in_chroots_of_one_zookeeper_count_it_once(zookeeper: Any, s3_server: Any) -> None:
    from ledgerlens.sources.stores import Stores

    c = generated_cluster(zookeeper, s3_server, "quick2", now_ms=default_now_ms(), scenario="healthy")
    client = zookeeper_client(ZooKeeperSource(hosts=zookeeper.hosts))
    try:
        whole = znode_count(client)
    finally:
        client.stop()
        client.close()
    stores = Stores.parse(f"zk:{c['hosts']}/ledgers", [f"zk:{c['hosts']}"])
    assert len(stores.sources()) == 2  # BookKeeper's and Pulsar's, two chroots of one ensemble
    assert preflight(None, None, stores=stores)["znodes"] == whole


def test_only_a_known_small_store_gets_the_quick_compiler() -> None:
    assert quick_compile_for(240)
    assert quick_compile_for(QUICK_COMPILE_ZNODES)
    assert not quick_compile_for(QUICK_COMPILE_ZNODES + 1)
    assert not quick_compile_for(None)  # a store that did not say (a snapshot, srvr refused)


def test_the_quick_compiler_is_a_local_driver_option_beside_the_quiet_logging() -> None:
    def driver(master: str, quick: bool) -> str:
        b = configure(SparkSession.Builder(), master=master, quick_compile=quick)
        return str(b._options.get("spark.driver.extraJavaOptions", ""))  # type: ignore[attr-defined]

    assert QUICK_COMPILE in driver("local[2]", True).split()
    assert QUICK_COMPILE not in driver("local[2]", False)
    assert QUICK_COMPILE not in driver("spark://somewhere:7077", True)  # its executors run the scans
    # both compilers (a run not known to be small): the slow one inlines less, on a local master only
    lean = set(LEAN_INLINING)
    assert lean <= set(driver("local[2]", False).split())
    assert not lean & set(driver("local[2]", True).split())  # C2 is off: nothing to tune
    assert not lean & set(driver("spark://somewhere:7077", False).split())
    # and leaves Janino, ASM and ANTLR to the quick compiler, where there is a slow one
    tools = set(quick_compiled_tools())
    assert tools and tools <= set(driver("local[2]", False).split())
    assert not tools & set(driver("local[2]", True).split())
    assert not tools & set(driver("spark://somewhere:7077", False).split())
    # every local JVM collects for throughput; a cluster's driver is left as its operators set it
    assert THROUGHPUT_GC in driver("local[2]", False).split()
    assert THROUGHPUT_GC in driver("local[2]", True).split()
    assert THROUGHPUT_GC not in driver("spark://somewhere:7077", False)


def test_the_test_sessions_jvm_inlines_less_and_collects_for_throughput(spark: Any) -> None:
    """The options reach the JVM, which takes them (an option it refused would stop it starting)."""
    jvm = spark.sparkContext._jvm
    mx = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
    )
    for option in LEAN_INLINING:
        name, value = option.removeprefix("-XX:").split("=")
        assert mx.getVMOption(name).getValue() == value
    assert mx.getVMOption(THROUGHPUT_GC.removeprefix("-XX:+")).getValue() == "true"


def test_the_test_sessions_jvm_leaves_the_tools_to_the_quick_compiler_silently(spark: Any) -> None:
    """The JVM holds a directive that keeps C2, and only C2, off Janino, ASM and ANTLR (as ``jcmd``
    prints its directives), and a JVM started with those options says nothing of them on its console."""
    import re
    import subprocess

    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    ask = ["jcmd", str(pid), "Compiler.directives_print"]
    printed = subprocess.run(ask, capture_output=True, text=True, timeout=60, check=True).stdout
    # each directive: its "matching:" patterns, then its C1 and its C2 settings
    blocks = [re.split(r"c[12] directives:", d) for d in printed.split("Directive:")[1:]]
    ours = [b for b in blocks if "org/codehaus/janino/" in b[0]]
    assert len(ours) == 1 and len(ours[0]) == 3, printed
    matching, c1, c2 = ours[0]
    for package in ("org/codehaus/janino/", "org/apache/xbean/asm9/", "org/antlr/"):
        assert package in matching, printed
    assert " Exclude:true " in c2 and " Exclude:true " not in c1, printed
    options = ["java", *quick_compiled_tools(), "-version"]
    java = subprocess.run(options, capture_output=True, text=True, timeout=60)
    assert java.returncode == 0 and "directive" not in java.stdout + java.stderr, java
    # the same options with the VM's own output on: the announcement this one keeps off the console
    loud = [o for o in quick_compiled_tools() if o != "-XX:-DisplayVMOutput"]
    said = subprocess.run(["java", *loud, "-version"], capture_output=True, text=True, timeout=60)
    assert said.returncode == 0 and "compiler directives added" in said.stdout, said
