//! Latency measurements as they arrive (Artemis's LatencyMeasurement
//! rows): checked whole against the declared data centers before any is
//! kept.

use std::net::IpAddr;

use pharos_route::latency::{Measured, MeasurementSpec};
use pharos_route::prefix::parse_prefix;

use crate::error::SpecError;
use crate::spec::DataCenterSpec;

/// How far in the future a measurement's time may be (clock skew between
/// the measuring host and this one) before it is refused.
const ALLOWED_SKEW_SECONDS: u64 = 300;

/// One latency measurement to keep: the newest per subnet and data center
/// wins.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    pub subnet: (std::net::IpAddr, u8),
    pub datacenter: String,
    pub measured: Measured,
}

/// Checks a batch of measurements against the declared data centers; the
/// first bad one is named and the whole batch refused.
pub fn check_measurements(specs: &[MeasurementSpec], datacenters: &[DataCenterSpec], now: u64) -> Result<Vec<Measurement>, SpecError> {
    specs.iter().enumerate().map(|(index, spec)| check_measurement(spec, &format!("measurements[{index}]"), datacenters, now)).collect()
}

fn check_measurement(spec: &MeasurementSpec, field: &str, datacenters: &[DataCenterSpec], now: u64) -> Result<Measurement, SpecError> {
    let invalid = |name: &str, message: String| SpecError { field: format!("{field}.{name}"), message };
    let subnet: (IpAddr, u8) = parse_prefix(&spec.subnet).map_err(|error| invalid("subnet", error.to_string()))?;
    if !datacenters.iter().any(|datacenter| datacenter.id == spec.datacenter) {
        return Err(invalid("datacenter", format!("no data center {:?} is declared", spec.datacenter)));
    }
    if !spec.rtt_ms.is_finite() || !(0.0..=600_000.0).contains(&spec.rtt_ms) {
        return Err(invalid("rtt_ms", format!("{} is not a round-trip time (0 to 600000 ms)", spec.rtt_ms)));
    }
    let at = spec.measured_at.unwrap_or(now);
    if at > now + ALLOWED_SKEW_SECONDS {
        return Err(invalid("measured_at", format!("{at} is {} s in the future", at - now)));
    }
    Ok(Measurement { subnet, datacenter: spec.datacenter.clone(), measured: Measured { rtt_ms: spec.rtt_ms, at } })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(subnet: &str, datacenter: &str, rtt_ms: f64, measured_at: Option<u64>) -> MeasurementSpec {
        MeasurementSpec { subnet: subnet.into(), datacenter: datacenter.into(), rtt_ms, measured_at }
    }

    #[test]
    fn every_bad_measurement_is_named() {
        let fra = [DataCenterSpec { id: "fra".into(), latitude: 50.1, longitude: 8.7, asn: None }];
        let error = |specs: &[MeasurementSpec]| check_measurements(specs, &fra, 10_000).unwrap_err().to_string();
        let good = spec("10.0.0.0/8", "fra", 1.0, None);
        assert_eq!(
            check_measurements(std::slice::from_ref(&good), &fra, 10_000).unwrap()[0].measured,
            Measured { rtt_ms: 1.0, at: 10_000 }
        );
        assert!(error(&[good.clone(), spec("10.0.0.1/8", "fra", 1.0, None)]).starts_with("measurements[1].subnet: "));
        assert_eq!(error(&[spec("10.0.0.0/8", "sin", 1.0, None)]), "measurements[0].datacenter: no data center \"sin\" is declared");
        assert!(error(&[spec("10.0.0.0/8", "fra", -1.0, None)]).starts_with("measurements[0].rtt_ms: -1 is not"));
        assert!(error(&[spec("10.0.0.0/8", "fra", f64::NAN, None)]).starts_with("measurements[0].rtt_ms: NaN is not"));
        assert_eq!(error(&[spec("10.0.0.0/8", "fra", 1.0, Some(20_000))]), "measurements[0].measured_at: 20000 is 10000 s in the future");
    }
}
