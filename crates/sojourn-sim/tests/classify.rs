//! Conntrack byte counting and threshold classification at nodes (seed 000's nftables rule).

use sojourn_sim::{run_toml, Column};

#[test]
fn priority_changes_exactly_at_the_inclusive_threshold() {
    // 1000-B frames = 986 B at the IP layer. Threshold 2958 B = exactly 3 packets: the
    // third packet's count (2958) is still inside 0-T, the fourth (3944) is not.
    let out = run_toml(
        r#"
        duration = "1s"
        [topology]
        kind = "graph"
        nodes = ["client", "server"]
        [[topology.links]]
        name = "nic"
        from = "client"
        to = "server"
        rate = "100Mbit"
        qdisc = "pfifo"
        [[workload]]
        kind = "cbr"
        from = "client"
        to = "server"
        rate = "8Mbit"
        packet_size = "1000B"
        stop = "10ms"
        [[classifier]]
        at = "client"
        map = [{ upto = "2958B", priority = "1:1" }, { priority = "1:2" }]
        [record]
        packets = ["nic"]
        "#,
    )
    .unwrap();
    let p = out.packets.expect("packet log");
    let Some(Column::U32(prio)) = p.get("priority") else {
        panic!()
    };
    let Some(Column::U64(ct)) = p.get("ct_bytes") else {
        panic!()
    };
    assert_eq!(&ct[..5], &[986, 1972, 2958, 3944, 4930]);
    assert_eq!(&prio[..5], &[0x10001, 0x10001, 0x10001, 0x10002, 0x10002]);
}

#[test]
fn classifier_on_output_hook_ignores_forwarded_packets() {
    let out = run_toml(
        r#"
        duration = "1s"
        [topology]
        kind = "graph"
        nodes = ["a", "r", "b"]
        [[topology.links]]
        name = "ar"
        from = "a"
        to = "r"
        rate = "100Mbit"
        [[topology.links]]
        name = "rb"
        from = "r"
        to = "b"
        rate = "100Mbit"
        [[workload]]
        kind = "cbr"
        from = "a"
        to = "b"
        rate = "8Mbit"
        packet_size = "1000B"
        stop = "5ms"
        [[classifier]]
        at = "r"
        map = [{ priority = "1:2" }]
        [record]
        packets = ["rb"]
        "#,
    )
    .unwrap();
    let p = out.packets.unwrap();
    let Some(Column::U32(prio)) = p.get("priority") else {
        panic!()
    };
    assert!(
        prio.iter().all(|&x| x == 0),
        "output hook does not see routed packets"
    );
    let Some(Column::U64(ct)) = p.get("ct_bytes") else {
        panic!()
    };
    assert_eq!(ct[0], 986, "but the router's conntrack still counts them");
}
