//! Loopback ports nothing listens on, for the servers a test starts
//! (also read by benches/store.rs, which includes support::postgres).

/// A port nothing listens on right now.
pub fn free_port() -> u16 {
    free_ports::<1>()[0]
}

/// `N` different ports nothing listens on right now (all held while chosen,
/// so they differ).
pub fn free_ports<const N: usize>() -> [u16; N] {
    let held: Vec<std::net::TcpListener> = (0..N)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0"))
        .collect();
    std::array::from_fn(|i| held[i].local_addr().expect("local address").port())
}
