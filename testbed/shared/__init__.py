"""The pure shared leaf: what the host agents run and the oracle models alike (collective step plans,
the BytePS partition, INA's constants, slot hash and timer rule). It opens no socket and imports
no scapy; it imports only the leaf model."""
