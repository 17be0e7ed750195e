//! Applications: workload generators that open flows over time (closed-loop actors,
//! Poisson arrivals, …). They are not on the per-packet path (they act once per flow), so
//! they are boxed trait objects.

use crate::sim::Sim;

pub trait App {
    /// Called once at time 0.
    fn start(&mut self, sim: &mut Sim, me: u32);
    /// This application's timer (set with [`Sim::app_timer`]) fired.
    fn on_timer(&mut self, sim: &mut Sim, me: u32);
    /// A flow this application owns completed.
    fn on_flow_complete(&mut self, _sim: &mut Sim, _me: u32, _flow: u32) {}
}

pub type AnyApp = Box<dyn App>;
